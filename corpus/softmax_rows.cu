// softmax_rows: out[r, :] = softmax(in[r, :]), one block per row (blockDim a multiple of 32, ≤ 1024),
// numerically stable (row max subtracted), max and sum by warp shuffles + shared memory, __expf.
#include "block_reduce.h"

extern "C" __global__ void softmax_rows(const float *__restrict__ in, float *__restrict__ out, int rows, int cols) {
    __shared__ float red[32];
    int row = blockIdx.x;
    if (row >= rows) return; // uniform across the block: no barrier divergence
    const float *x = in + (long long)row * cols;
    float *y = out + (long long)row * cols;
    float m = -CORPUS_FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    m = block_max(m, red);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float e = __expf(x[c] - m);
        y[c] = e;
        s += e;
    }
    s = block_sum(s, red);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] *= inv;
}
