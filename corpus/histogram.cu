// histogram: 256-bin histogram of data[i] & 255. Each block counts into shared memory with shared
// atomics, then adds its non-zero bins into the global bins with global atomics. `bins` accumulates:
// the caller initialises it (the test seeds it with random counts to prove accumulation).
#include "compat.h"

#define BINS 256

extern "C" __global__ void histogram(const unsigned *__restrict__ data, int n, unsigned *__restrict__ bins) {
    __shared__ unsigned s[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) s[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&s[data[i] & (BINS - 1)], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (s[b] != 0) atomicAdd(&bins[b], s[b]);
}
