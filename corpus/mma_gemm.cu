// mma_gemm: C[M×N] = A[M×K] · B[K×N] on tensor cores (mma.sync.aligned, sm_80), each warp one
// 16×8 tile of C. A is row-major; B is held column-major (Bt[N×K], each column's K elements
// contiguous), as `.row.col` takes them. Fragments are loaded straight from global memory with
// the addresses of the PTX ISA's fragment tables (groupID g = lane / 4, t = lane % 4), or, in
// mma_gemm_f16_smem, staged in shared memory and loaded with ldmatrix as CUTLASS-style code does.
// M must be a multiple of 16, N of 8, K of 16 (f16) or 32 (s8); other sizes do nothing.
//
// The size checks stay inline in each kernel: with them in a shared helper, ptxas 13.0
// if-converted the early exit and picked the sandbox's hidden base parameter as the don't-care
// value of its selects, which ptxvm's SASS canary (tests/all/sass.rs) flags as a raw read.
#include "compat.h"

// f16 inputs, f32 accumulators: mma.m16n8k16.row.col.f32.f16.f16.f32.
extern "C" __global__ void mma_gemm_f16(const unsigned short *__restrict__ A,
                                        const unsigned short *__restrict__ Bt,
                                        float *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 8 != 0 || K % 16 != 0 || N == 0) return;
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tiles_n = N / 8;
    int tr = warp / tiles_n, tc = warp % tiles_n;
    if (tr * 16 >= M) return;  // whole warps leave together: mma needs all 32 lanes
    int g = lane >> 2, t = lane & 3;
    const unsigned short *a0 = A + (long)(tr * 16 + g) * K + t * 2;
    const unsigned short *a1 = a0 + 8 * (long)K;
    const unsigned short *b = Bt + (long)(tc * 8 + g) * K + t * 2;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        // Two elements a word: the second A and B words are 8 elements on.
        unsigned ra0 = *(const unsigned *)(a0 + k0), ra1 = *(const unsigned *)(a1 + k0);
        unsigned ra2 = *(const unsigned *)(a0 + k0 + 8), ra3 = *(const unsigned *)(a1 + k0 + 8);
        unsigned rb0 = *(const unsigned *)(b + k0), rb1 = *(const unsigned *)(b + k0 + 8);
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
    }
    float *c0 = C + (long)(tr * 16 + g) * N + tc * 8 + t * 2;
    float *c1 = c0 + 8 * (long)N;
    c0[0] = d0;
    c0[1] = d1;
    c1[0] = d2;
    c1[1] = d3;
}

// s8 × u8 inputs, s32 accumulators: mma.m16n8k32.row.col.s32.s8.u8.s32 (exact on every device).
extern "C" __global__ void mma_gemm_s8(const signed char *__restrict__ A,
                                       const unsigned char *__restrict__ Bt,
                                       int *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 8 != 0 || K % 32 != 0 || N == 0) return;
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tiles_n = N / 8;
    int tr = warp / tiles_n, tc = warp % tiles_n;
    if (tr * 16 >= M) return;
    int g = lane >> 2, t = lane & 3;
    const signed char *a0 = A + (long)(tr * 16 + g) * K + t * 4;
    const signed char *a1 = a0 + 8 * (long)K;
    const unsigned char *b = Bt + (long)(tc * 8 + g) * K + t * 4;
    int d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int k0 = 0; k0 < K; k0 += 32) {
        // Four elements a word: the second A and B words are 16 elements on.
        unsigned ra0 = *(const unsigned *)(a0 + k0), ra1 = *(const unsigned *)(a1 + k0);
        unsigned ra2 = *(const unsigned *)(a0 + k0 + 16), ra3 = *(const unsigned *)(a1 + k0 + 16);
        unsigned rb0 = *(const unsigned *)(b + k0), rb1 = *(const unsigned *)(b + k0 + 16);
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+r"(d0), "+r"(d1), "+r"(d2), "+r"(d3)
            : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
    }
    int *c0 = C + (long)(tr * 16 + g) * N + tc * 8 + t * 2;
    int *c1 = c0 + 8 * (long)N;
    c0[0] = d0;
    c0[1] = d1;
    c1[0] = d2;
    c1[1] = d3;
}

// As mma_gemm_f16, with each warp's A and B tiles staged in shared memory (A by zero-filling
// cp.async, B by plain loads and stores) and its fragments loaded by ldmatrix: .x4 through generic addresses for A (lane l names row l % 16, column
// 8 (l / 16) of the 16×16 tile), .x2 through .shared ones for B (lane l < 16 names row l % 8 of
// Bt's 8×16 tile, column 8 (l / 8)). Up to 8 warps a block.
extern "C" __global__ void mma_gemm_f16_smem(const unsigned short *__restrict__ A,
                                             const unsigned short *__restrict__ Bt,
                                             float *__restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) unsigned short As[8][16 * 16];
    __shared__ __align__(16) unsigned short Bs[8][8 * 16];
    if (M % 16 != 0 || N % 8 != 0 || K % 16 != 0 || N == 0 || blockDim.x > 256) return;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tiles_n = N / 8;
    int tr = warp / tiles_n, tc = warp % tiles_n;
    if (tr * 16 >= M) return;
    int g = lane >> 2, t = lane & 3;
    const unsigned short *a_row = &As[w][(lane % 16) * 16 + (lane / 16) * 8];
    unsigned long long b_row;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(b_row) : "l"(&Bs[w][(lane % 8) * 16 + ((lane / 8) % 2) * 8]));
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        // A's 16×16 tile: 16 bytes a lane, by cp.async with a source size (the zero-filling
        // form; every row is in range here, so it reads all 16).
        int ar = lane / 2, ac = (lane % 2) * 8;
        unsigned long long a_dst;
        asm("cvta.to.shared.u64 %0, %1;" : "=l"(a_dst) : "l"(&As[w][ar * 16 + ac]));
        unsigned a_bytes = k0 + ac < K ? 16 : 0;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"l"(a_dst),
                     "l"(A + (long)(tr * 16 + ar) * K + k0 + ac), "r"(a_bytes)
                     : "memory");
        asm volatile("cp.async.wait_all;" ::: "memory");
        for (int e = 0; e < 4; ++e) {
            int i = lane * 4 + e;
            Bs[w][i] = Bt[(long)(tc * 8 + i / 16) * K + k0 + i % 16];
        }
        asm volatile("bar.warp.sync -1;" ::: "memory");
        unsigned ra0, ra1, ra2, ra3, rb0, rb1;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(ra0), "=r"(ra1), "=r"(ra2), "=r"(ra3)
                     : "l"(a_row)
                     : "memory");
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                     : "=r"(rb0), "=r"(rb1)
                     : "l"(b_row)
                     : "memory");
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
        asm volatile("bar.warp.sync -1;" ::: "memory");
    }
    float *c0 = C + (long)(tr * 16 + g) * N + tc * 8 + t * 2;
    float *c1 = c0 + 8 * (long)N;
    c0[0] = d0;
    c0[1] = d1;
    c1[0] = d2;
    c1[1] = d3;
}

// As mma_gemm_f16 with nvcuda::wmma's instructions (what its `half` fragments compile to):
// each warp one 16×16 tile of C, accumulated in registers over K, stored row-major. M, N and K
// must be multiples of 16.
extern "C" __global__ void mma_gemm_wmma(const unsigned short *__restrict__ A,
                                         const unsigned short *__restrict__ Bt,
                                         float *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 16 != 0 || K % 16 != 0 || N == 0) return;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tiles_n = N / 16;
    int tr = warp / tiles_n, tc = warp % tiles_n;
    if (tr * 16 >= M) return;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f, c6 = 0.0f, c7 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        unsigned a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7;
        asm volatile(
            "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
            "[%8], %9;"
            : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3), "=r"(a4), "=r"(a5), "=r"(a6), "=r"(a7)
            : "l"(A + (long)tr * 16 * K + k0), "r"(K));
        asm volatile(
            "wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
            "[%8], %9;"
            : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3), "=r"(b4), "=r"(b5), "=r"(b6), "=r"(b7)
            : "l"(Bt + (long)tc * 16 * K + k0), "r"(K));
        asm volatile(
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, "
            "{%8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19, %20, %21, %22, %23}, "
            "{%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3), "+f"(c4), "+f"(c5), "+f"(c6), "+f"(c7)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(a4), "r"(a5), "r"(a6), "r"(a7), "r"(b0),
              "r"(b1), "r"(b2), "r"(b3), "r"(b4), "r"(b5), "r"(b6), "r"(b7));
    }
    asm volatile(
        "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
        "%8}, %9;" ::"l"(C + (long)tr * 16 * N + tc * 16),
        "f"(c0), "f"(c1), "f"(c2), "f"(c3), "f"(c4), "f"(c5), "f"(c6), "f"(c7), "r"(N)
        : "memory");
}

// nvcuda::wmma's other types, one kernel each, tiled as mma_gemm_wmma (each warp one tile of C,
// accumulated over K): bf16 into f32 and s8 into s32 (m16n16k16), tf32 into f32 (m16n16k8),
// f64 (m8n8k4). M, N and K must be multiples of the tile's.
extern "C" __global__ void mma_gemm_wmma_bf16(const unsigned short *__restrict__ A,
                                              const unsigned short *__restrict__ Bt,
                                              float *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 16 != 0 || K % 16 != 0 || N == 0) return;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tr = warp / (N / 16), tc = warp % (N / 16);
    if (tr * 16 >= M) return;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f, c6 = 0.0f, c7 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        unsigned a0, a1, a2, a3, b0, b1, b2, b3;
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.global.bf16 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "l"(A + (long)tr * 16 * K + k0), "r"(K));
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.global.bf16 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "l"(Bt + (long)tc * 16 * K + k0), "r"(K));
        asm volatile(
            "wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32 {%0, %1, %2, %3, %4, %5, %6, "
            "%7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3), "+f"(c4), "+f"(c5), "+f"(c6), "+f"(c7)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(b2), "r"(b3));
    }
    asm volatile(
        "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
        "%8}, %9;" ::"l"(C + (long)tr * 16 * N + tc * 16),
        "f"(c0), "f"(c1), "f"(c2), "f"(c3), "f"(c4), "f"(c5), "f"(c6), "f"(c7), "r"(N)
        : "memory");
}

extern "C" __global__ void mma_gemm_wmma_s8(const signed char *__restrict__ A,
                                            const signed char *__restrict__ Bt,
                                            int *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 16 != 0 || K % 16 != 0 || N == 0) return;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tr = warp / (N / 16), tc = warp % (N / 16);
    if (tr * 16 >= M) return;
    int c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        unsigned a0, a1, b0, b1;
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.global.s8 {%0, %1}, [%2], %3;"
                     : "=r"(a0), "=r"(a1)
                     : "l"(A + (long)tr * 16 * K + k0), "r"(K));
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.global.s8 {%0, %1}, [%2], %3;"
                     : "=r"(b0), "=r"(b1)
                     : "l"(Bt + (long)tc * 16 * K + k0), "r"(K));
        asm volatile(
            "wmma.mma.sync.aligned.row.col.m16n16k16.s32.s8.s8.s32 {%0, %1, %2, %3, %4, %5, %6, "
            "%7}, {%8, %9}, {%10, %11}, {%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3), "+r"(c4), "+r"(c5), "+r"(c6), "+r"(c7)
            : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
    }
    asm volatile(
        "wmma.store.d.sync.aligned.row.m16n16k16.global.s32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
        "%8}, %9;" ::"l"(C + (long)tr * 16 * N + tc * 16),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(c5), "r"(c6), "r"(c7), "r"(N)
        : "memory");
}

extern "C" __global__ void mma_gemm_wmma_tf32(const float *__restrict__ A,
                                              const float *__restrict__ Bt,
                                              float *__restrict__ C, int M, int N, int K) {
    if (M % 16 != 0 || N % 16 != 0 || K % 8 != 0 || N == 0) return;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tr = warp / (N / 16), tc = warp % (N / 16);
    if (tr * 16 >= M) return;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f, c6 = 0.0f, c7 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 8) {
        unsigned a0, a1, a2, a3, b0, b1, b2, b3;
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k8.global.tf32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "l"(A + (long)tr * 16 * K + k0), "r"(K));
        asm volatile("wmma.load.b.sync.aligned.col.m16n16k8.global.tf32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "l"(Bt + (long)tc * 16 * K + k0), "r"(K));
        asm volatile(
            "wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32 {%0, %1, %2, %3, %4, %5, %6, "
            "%7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3, %4, %5, %6, %7};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3), "+f"(c4), "+f"(c5), "+f"(c6), "+f"(c7)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(b2), "r"(b3));
    }
    asm volatile(
        "wmma.store.d.sync.aligned.row.m16n16k8.global.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, "
        "%8}, %9;" ::"l"(C + (long)tr * 16 * N + tc * 16),
        "f"(c0), "f"(c1), "f"(c2), "f"(c3), "f"(c4), "f"(c5), "f"(c6), "f"(c7), "r"(N)
        : "memory");
}

extern "C" __global__ void mma_gemm_wmma_f64(const double *__restrict__ A,
                                             const double *__restrict__ Bt,
                                             double *__restrict__ C, int M, int N, int K) {
    if (M % 8 != 0 || N % 8 != 0 || K % 4 != 0 || N == 0) return;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tr = warp / (N / 8), tc = warp % (N / 8);
    if (tr * 8 >= M) return;
    double c0 = 0.0, c1 = 0.0;
    for (int k0 = 0; k0 < K; k0 += 4) {
        double a0, b0;
        asm volatile("wmma.load.a.sync.aligned.row.m8n8k4.global.f64 {%0}, [%1], %2;"
                     : "=d"(a0)
                     : "l"(A + (long)tr * 8 * K + k0), "r"(K));
        asm volatile("wmma.load.b.sync.aligned.col.m8n8k4.global.f64 {%0}, [%1], %2;"
                     : "=d"(b0)
                     : "l"(Bt + (long)tc * 8 * K + k0), "r"(K));
        asm volatile(
            "wmma.mma.sync.aligned.row.col.m8n8k4.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
            : "+d"(c0), "+d"(c1)
            : "d"(a0), "d"(b0));
    }
    asm volatile("wmma.store.d.sync.aligned.row.m8n8k4.global.f64 [%0], {%1, %2}, %3;" ::"l"(
                     C + (long)tr * 8 * N + tc * 8),
                 "d"(c0), "d"(c1), "r"(N)
                 : "memory");
}
