// reduce_f64_dynamic: per-block sum of floats accumulated in double precision through
// *dynamic* shared memory (extern __shared__, sized at launch: blockDim.x * 8 bytes).
// blockDim.x must be a power of two. partial[blockIdx.x] receives the block's sum.
#include "compat.h"

extern "C" __global__ void reduce_f64_dynamic(const float *__restrict__ in, double *__restrict__ partial, int n) {
    extern __shared__ double sdata[];
    unsigned t = threadIdx.x;
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) acc += (double)in[i];
    sdata[t] = acc;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) sdata[t] += sdata[t + stride];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sdata[0];
}
