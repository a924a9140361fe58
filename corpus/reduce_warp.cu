// reduce_warp: grid-stride per-thread sums, a warp-shuffle tree in each warp, then the warp sums
// (through shared memory) reduced by warp 0. partial[blockIdx.x] receives the block's sum.
#include "compat.h"

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(CORPUS_FULL_MASK, v, offset);
    return v;
}

extern "C" __global__ void reduce_warp(const float *__restrict__ in, float *__restrict__ partial, int n) {
    __shared__ float warp_sums[32];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
    v = warp_sum(v);
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int warps = (blockDim.x + 31) >> 5;
        v = lane < warps ? warp_sums[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partial[blockIdx.x] = v;
    }
}
