// compat.h: makes every corpus kernel compile unchanged with nvcc (real CUDA headers) and with
// clang + /work/shared/cuda/cudamini.h (no CUDA toolkit). Under clang, cudamini.h arrives through
// `-include` (see gen-clang.sh); this header adds what it lacks. The PTX-level helpers below are
// inline asm so that both compilers emit exactly the instruction the kernel means to exercise.
#pragma once

#ifndef __NVCC__
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
__device__ __forceinline__ unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * (unsigned long long)b) >> 32);
}
#endif

#define CORPUS_FULL_MASK 0xffffffffu
#define CORPUS_FLT_MAX 3.402823466e38f

// f16 and bf16 are carried as their raw 16 bits (unsigned short): clang with -nocudainc has no
// cuda_fp16.h, and raw bits make the CPU reference comparison exact.
__device__ __forceinline__ unsigned short f32_to_f16_bits(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float f16_bits_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short f16_fma_bits(unsigned short a, unsigned short b, unsigned short c) {
    unsigned short d;
    asm("fma.rn.f16 %0, %1, %2, %3;" : "=h"(d) : "h"(a), "h"(b), "h"(c));
    return d;
}
__device__ __forceinline__ unsigned short f32_to_bf16_bits(float f) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Bit-field and byte-permute instructions with PTX's own semantics (pos/len taken mod 256).
__device__ __forceinline__ unsigned ptx_bfe_u32(unsigned a, unsigned pos, unsigned len) {
    unsigned d;
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(pos), "r"(len));
    return d;
}
__device__ __forceinline__ int ptx_bfe_s32(int a, unsigned pos, unsigned len) {
    int d;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(pos), "r"(len));
    return d;
}
__device__ __forceinline__ unsigned ptx_bfi_b32(unsigned a, unsigned b, unsigned pos, unsigned len) {
    unsigned d;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(pos), "r"(len));
    return d;
}
__device__ __forceinline__ unsigned ptx_prmt_b32(unsigned a, unsigned b, unsigned sel) {
    unsigned d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// Shared-memory barriers (mbarrier, PTX 7.0, sm_80) and the cp.async forms that feed them, as
// CUTLASS-style pipelines write them: barriers and buffers named by their 32-bit .shared
// addresses. Waits go by the state an arrival returns (test_wait's .parity form needs PTX 7.1,
// past clang 14's 7.0) and never block: the caller spins.
__device__ __forceinline__ unsigned smem_u32(const void *p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ unsigned long long mbar_arrive(unsigned bar) {
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(bar) : "memory");
    return state;
}
__device__ __forceinline__ bool mbar_test_wait(unsigned bar, unsigned long long state) {
    unsigned done;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.test_wait.shared.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(bar), "l"(state)
        : "memory");
    return done != 0;
}
// Returns once the phase that `state` came from has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned long long state) {
    while (!mbar_test_wait(bar, state)) {
    }
}
// The barrier sees one arrival from this thread once its earlier cp.async copies have landed;
// .noinc: that arrival is one of the count given to mbar_init.
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" ::"r"(bar) : "memory");
}
// 16 bytes global → shared, bypassing L1; only the first src_bytes are read, the rest of the
// 16 are zeroed (how a tile's tail past the input's end is padded).
__device__ __forceinline__ void cp_async_cg16_zfill(unsigned dst, const void *src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
