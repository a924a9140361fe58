// warp_vote: warp-level votes and shuffles beyond the basics, and a CAS loop.
//   per lane i: out[4*i ..] = ballot(x odd), any(x > 0), all(x > -1000), shfl.up(x, 1) (own x on lane 0)
//   max_out[0] = max over all x via an atomicCAS loop (int compare-and-swap)
// blockDim must be a multiple of 32 (every lane takes part in the votes).
#include "compat.h"

#ifndef __NVCC__
__device__ __forceinline__ int __any_sync(unsigned m, int p) { return __nvvm_vote_any_sync(m, p); }
__device__ __forceinline__ int __all_sync(unsigned m, int p) { return __nvvm_vote_all_sync(m, p); }
__device__ __forceinline__ int __shfl_up_sync(unsigned m, int v, unsigned d, int w = 32) {
    return __nvvm_shfl_sync_up_i32(m, v, d, (32 - w) << 8);
}
#endif

__device__ __forceinline__ void cas_max(int *p, int v) {
    int old = *p;
    while (old < v) {
        int seen = atomicCAS(p, old, v);
        if (seen == old) break;
        old = seen;
    }
}

extern "C" __global__ void warp_vote(const int *__restrict__ in, unsigned *__restrict__ out, int *max_out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool valid = i < n;
    int x = valid ? in[i] : 0;
    unsigned ballot = __ballot_sync(CORPUS_FULL_MASK, x & 1);
    int any = __any_sync(CORPUS_FULL_MASK, x > 0);
    int all = __all_sync(CORPUS_FULL_MASK, x > -1000);
    int up = __shfl_up_sync(CORPUS_FULL_MASK, x, 1);
    if (valid) {
        unsigned *o = out + 4 * i;
        o[0] = ballot;
        o[1] = (unsigned)(any != 0);
        o[2] = (unsigned)(all != 0);
        o[3] = (unsigned)up;
        cas_max(max_out, x);
    }
}
