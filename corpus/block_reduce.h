// block_reduce.h: warp-shuffle and block-wide max/sum shared by the row-wise kernels
// (softmax_rows, layer_norm). Every thread of the block gets the result. `red` is a 32-float
// __shared__ scratch array; the leading __syncthreads makes back-to-back calls safe.
#pragma once
#include "compat.h"

__device__ __forceinline__ float warp_max(float v) {
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(CORPUS_FULL_MASK, v, m));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(CORPUS_FULL_MASK, v, m);
    return v;
}

__device__ __forceinline__ float block_max(float v, float *red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < warps ? red[lane] : -CORPUS_FLT_MAX;
    return warp_max(v);
}

__device__ __forceinline__ float block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < warps ? red[lane] : 0.0f;
    return warp_sum(v);
}
