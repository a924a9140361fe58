// matmul_tiled: C = A * B for row-major A (m x k), B (k x n), C (m x n), with 16x16 tiles staged
// in shared memory. Launch with block (16, 16) and grid (ceil(n/16), ceil(m/16)).
#define TILE 16
extern "C" __global__ void matmul_tiled(const float *a, const float *b, float *c,
                                        unsigned m, unsigned n, unsigned k) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    unsigned row = blockIdx.y * TILE + threadIdx.y;
    unsigned col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (unsigned t0 = 0; t0 < k; t0 += TILE) {
        unsigned ac = t0 + threadIdx.x;
        unsigned br = t0 + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < m && ac < k) ? a[row * k + ac] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (br < k && col < n) ? b[br * n + col] : 0.0f;
        __syncthreads();
        for (unsigned j = 0; j < TILE; ++j) acc += ta[threadIdx.y][j] * tb[j][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}
