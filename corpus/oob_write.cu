// oob_write: thread 0 stores 1.0f at p[index]. With an index far past the allocation this is the
// fixture for the sticky CUDA_ERROR_ILLEGAL_ADDRESS test; with an in-range index it is a plain store.
#include "compat.h"

extern "C" __global__ void oob_write(float *p, unsigned long long index) {
    if (threadIdx.x == 0 && blockIdx.x == 0) p[index] = 1.0f;
}
