// transpose: out[cols×rows] = in[rows×cols]ᵀ through a 32×33 shared tile (padding avoids bank
// conflicts). Block = 32×8 threads, each thread moves 4 elements; grid = ceil(cols/32) × ceil(rows/32).
#include "compat.h"

#define TDIM 32
#define TROWS 8

extern "C" __global__ void transpose(const float *__restrict__ in, float *__restrict__ out, int rows, int cols) {
    __shared__ float tile[TDIM][TDIM + 1];
    int x = blockIdx.x * TDIM + threadIdx.x;
    int y = blockIdx.y * TDIM + threadIdx.y;
    for (int j = 0; j < TDIM; j += TROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TDIM + threadIdx.x;
    y = blockIdx.x * TDIM + threadIdx.y;
    for (int j = 0; j < TDIM; j += TROWS)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
