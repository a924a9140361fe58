// reduce_shared: per-block sum of 2*256 floats through a shared-memory tree (block = 256 threads).
// partial[blockIdx.x] receives the block's sum; the host (or a second pass) adds the partials.
#include "compat.h"

#define BLOCK 256

extern "C" __global__ void reduce_shared(const float *__restrict__ in, float *__restrict__ partial, int n) {
    __shared__ float s[BLOCK];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * (BLOCK * 2) + t;
    float v = 0.0f;
    if (i < (unsigned)n) v = in[i];
    if (i + BLOCK < (unsigned)n) v += in[i + BLOCK];
    s[t] = v;
    __syncthreads();
    for (unsigned stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}
