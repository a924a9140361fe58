// wide_math: double-precision and 64-bit integer lane work, plus the approximate f32 math
// instructions, each through the PTX instruction it names (inline asm, same for both compilers).
//   f64_math:   out[5*i ..] = a+b, a*b, a/b, sqrt.rn(|a|), fma.rn(a, b, 1.0)
//   u64_math:   out[6*i ..] = a*b, mul.hi.u64, a/(b|1), a%(b|1), popc.b64, (s64)a >> (b&63)
//   approx_f32: sin, cos, ex2, lg2(|x|+1), rsqrt(|x|+1), tanh — one output array each
#include "compat.h"

__device__ __forceinline__ double ptx_sqrt_f64(double x) { double r; asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(x)); return r; }
__device__ __forceinline__ double ptx_fma_f64(double a, double b, double c) { double r; asm("fma.rn.f64 %0, %1, %2, %3;" : "=d"(r) : "d"(a), "d"(b), "d"(c)); return r; }
__device__ __forceinline__ unsigned long long ptx_mulhi_u64(unsigned long long a, unsigned long long b) { unsigned long long r; asm("mul.hi.u64 %0, %1, %2;" : "=l"(r) : "l"(a), "l"(b)); return r; }
__device__ __forceinline__ unsigned ptx_popc_b64(unsigned long long a) { unsigned r; asm("popc.b64 %0, %1;" : "=r"(r) : "l"(a)); return r; }

#define APPROX(name, inst) \
    __device__ __forceinline__ float name(float x) { float r; asm(inst " %0, %1;" : "=f"(r) : "f"(x)); return r; }
APPROX(ptx_sin, "sin.approx.f32")
APPROX(ptx_cos, "cos.approx.f32")
APPROX(ptx_ex2, "ex2.approx.f32")
APPROX(ptx_lg2, "lg2.approx.f32")
APPROX(ptx_rsqrt, "rsqrt.approx.f32")
APPROX(ptx_tanh, "tanh.approx.f32")

extern "C" __global__ void f64_math(const double *__restrict__ a, const double *__restrict__ b, double *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i];
    double *o = out + 5 * i;
    o[0] = x + y;
    o[1] = x * y;
    o[2] = x / y;
    o[3] = ptx_sqrt_f64(x < 0.0 ? -x : x);
    o[4] = ptx_fma_f64(x, y, 1.0);
}

extern "C" __global__ void u64_math(const unsigned long long *__restrict__ a, const unsigned long long *__restrict__ b,
                                    unsigned long long *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = a[i], y = b[i], d = y | 1ull;
    unsigned long long *o = out + 6 * i;
    o[0] = x * y;
    o[1] = ptx_mulhi_u64(x, y);
    o[2] = x / d;
    o[3] = x % d;
    o[4] = ptx_popc_b64(x);
    o[5] = (unsigned long long)((long long)x >> (y & 63));
}

extern "C" __global__ void approx_f32(const float *__restrict__ x, float *__restrict__ s, float *__restrict__ c,
                                      float *__restrict__ e, float *__restrict__ l, float *__restrict__ r,
                                      float *__restrict__ t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float mag = (v < 0.0f ? -v : v) + 1.0f;
    s[i] = ptx_sin(v);
    c[i] = ptx_cos(v);
    e[i] = ptx_ex2(v);
    l[i] = ptx_lg2(mag);
    r[i] = ptx_rsqrt(mag);
    t[i] = ptx_tanh(v);
}
