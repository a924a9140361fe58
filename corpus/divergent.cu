// divergent: lanes of one warp take different paths (by lane and by data, including a loop with a
// data-dependent trip count), then reconverge for a full-warp ballot. Every thread of the grid
// reaches the ballot (out-of-range threads act on x = 0), so blockDim must be a multiple of 32.
// out[i] = r ^ ballot(r & 1) over the warp.
#include "compat.h"

extern "C" __global__ void divergent(const int *__restrict__ in, int *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool valid = i < n;
    int x = valid ? in[i] : 0;
    int r;
    switch (threadIdx.x & 3) {
    case 0:
        r = x * 3;
        break;
    case 1:
        r = 0;
        for (int k = 0; k < (x & 15); ++k) r += k ^ x;
        break;
    case 2:
        if (x < 0) r = -x;
        else if (x & 1) r = x >> 1;
        else r = x << 1;
        break;
    default:
        r = x - 7;
        break;
    }
    unsigned ballot = __ballot_sync(CORPUS_FULL_MASK, r & 1);
    if (valid) out[i] = r ^ (int)ballot;
}
