// device_call: per-element Collatz step count (capped at 1000) through non-inlined device
// functions, so the PTX has .func definitions, call with parameters and return values, and a
// data-dependent loop whose trip count diverges across lanes.
#include "compat.h"

__device__ __noinline__ unsigned collatz_next(unsigned x) { return (x & 1u) ? 3u * x + 1u : x >> 1; }

__device__ __noinline__ unsigned collatz_steps(unsigned x, unsigned limit) {
    unsigned steps = 0;
    while (x > 1u && steps < limit) {
        x = collatz_next(x);
        ++steps;
    }
    return steps;
}

extern "C" __global__ void device_call(const unsigned *__restrict__ in, unsigned *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = collatz_steps(in[i], 1000u);
}
