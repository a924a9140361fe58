// scan_block: inclusive prefix sum of ints within each block of 256 (Hillis-Steele, double-buffered
// in shared memory). Each block scans its own 256-element segment independently.
#include "compat.h"

#define BLOCK 256

extern "C" __global__ void scan_block(const int *__restrict__ in, int *__restrict__ out, int n) {
    __shared__ int buf[2][BLOCK];
    int t = threadIdx.x;
    int i = blockIdx.x * BLOCK + t;
    int cur = 0;
    buf[0][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < BLOCK; offset <<= 1) {
        int v = buf[cur][t];
        if (t >= offset) v += buf[cur][t - offset];
        buf[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
    }
    if (i < n) out[i] = buf[cur][t];
}
