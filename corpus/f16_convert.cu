// f16_convert: f32 → f16 (round to nearest even) → f32, and f32 → bf16, on raw 16-bit patterns.
// f16_fma: d = a * b + c computed in f16 with one rounding (fma.rn.f16).
#include "compat.h"

extern "C" __global__ void f16_convert(const float *__restrict__ in, unsigned short *__restrict__ f16,
                                       float *__restrict__ back, unsigned short *__restrict__ bf16, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned short h = f32_to_f16_bits(in[i]);
    f16[i] = h;
    back[i] = f16_bits_to_f32(h);
    bf16[i] = f32_to_bf16_bits(in[i]);
}

extern "C" __global__ void f16_fma(const unsigned short *__restrict__ a, const unsigned short *__restrict__ b,
                                   const unsigned short *__restrict__ c, unsigned short *__restrict__ d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = f16_fma_bits(a[i], b[i], c[i]);
}
