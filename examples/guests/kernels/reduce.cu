// reduce_sum: each block sums 2*blockDim.x inputs in shared memory (tree reduction) and writes
// one partial sum per block; the host (or a second launch) sums the partials. No atomics, so the
// result is deterministic. blockDim.x must be a power of two <= 256.
extern "C" __global__ void reduce_sum(const float *in, float *partials, unsigned n) {
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x * 2 + t;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    s[t] = v;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = s[0];
}
