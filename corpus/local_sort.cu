// local_sort: each thread sorts 16 values in a per-thread array indexed by data-dependent
// positions (forces .local memory) and writes them back in order: out[16*i .. 16*i+16].
#include "compat.h"

extern "C" __global__ void local_sort(const int *__restrict__ in, int *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v[16];
    for (int k = 0; k < 16; ++k) v[k] = in[16 * i + k];
    // Insertion sort: the inner loop's trip count depends on the data.
    for (int k = 1; k < 16; ++k) {
        int key = v[k];
        int j = k - 1;
        while (j >= 0 && v[j] > key) {
            v[j + 1] = v[j];
            --j;
        }
        v[j + 1] = key;
    }
    for (int k = 0; k < 16; ++k) out[16 * i + k] = v[k];
}
