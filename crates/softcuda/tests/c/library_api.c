/* A driver-API program on the library API (CUDA 12+), written as a user would: with the cuda.h
 * declarations it needs (cuda_decls.h), it loads a PTX string with cuLibraryLoadData before any
 * context exists, then in each of two contexts sets the library's global `factor`, launches `scale`
 * through the CUkernel cast to CUfunction (and once through cuKernelGetFunction) and checks
 * out[i] = factor * i. Linked with -lcuda; run against softcuda through LD_LIBRARY_PATH. Prints
 * "library ok" and exits 0 on success. */
#include <stdio.h>
#include <string.h>

#include "cuda_decls.h"

static const char *PTX =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .global .align 4 .u32 factor = 1;\n"
    ".visible .entry scale(.param .u64 out, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<8>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [out];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.u32 %p1, %r5, %r1;\n"
    "  @%p1 bra DONE;\n"
    "  ld.global.u32 %r6, [factor];\n"
    "  mul.lo.s32 %r7, %r6, %r5;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mul.wide.u32 %rd3, %r5, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  st.global.u32 [%rd4], %r7;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#define N 1000

static int check(CUresult r, const char *what) {
    if (r != 0) {
        const char *name = "?";
        cuGetErrorName(r, &name);
        printf("%s failed: %s (%d)\n", what, name, r);
        return 1;
    }
    return 0;
}

/* In the current context: sets factor (when `set`), launches scale through `f`, checks that the
 * output is `factor` * i. */
static int run(CUlibrary lib, CUfunction f, unsigned factor, int set) {
    CUdeviceptr global, out;
    size_t bytes = 0;
    unsigned n = N, host[N];
    if (check(cuLibraryGetGlobal(&global, &bytes, lib, "factor"), "cuLibraryGetGlobal")) return 1;
    if (bytes != sizeof(unsigned)) {
        printf("factor is %zu bytes\n", bytes);
        return 1;
    }
    if (set && check(cuMemcpyHtoD_v2(global, &factor, sizeof factor), "set factor")) return 1;
    if (check(cuMemAlloc_v2(&out, sizeof host), "cuMemAlloc")) return 1;
    void *args[] = {&out, &n};
    if (check(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, 0), "launch"))
        return 1;
    if (check(cuMemcpyDtoH_v2(host, out, sizeof host), "cuMemcpyDtoH")) return 1;
    cuMemFree_v2(out);
    for (unsigned i = 0; i < N; i++) {
        if (host[i] != factor * i) {
            printf("out[%u] = %u, want %u\n", i, host[i], factor * i);
            return 1;
        }
    }
    return 0;
}

int main(void) {
    CUdevice dev;
    CUcontext a, b;
    CUlibrary lib;
    CUkernel scale;
    CUfunction f;
    unsigned count = 0;
    const char *name = 0;
    if (check(cuInit(0), "cuInit") || check(cuDeviceGet(&dev, 0), "cuDeviceGet")) return 1;
    /* No context exists yet: a library does not need one. */
    if (check(cuLibraryLoadData(&lib, PTX, 0, 0, 0, 0, 0, 0), "cuLibraryLoadData")) return 1;
    if (check(cuLibraryGetKernelCount(&count, lib), "cuLibraryGetKernelCount")) return 1;
    if (check(cuLibraryGetKernel(&scale, lib, "scale"), "cuLibraryGetKernel")) return 1;
    if (check(cuKernelGetName(&name, scale), "cuKernelGetName")) return 1;
    printf("kernels: %u, first: %s\n", count, name);
    if (check(cuCtxCreate_v2(&a, 0, dev), "cuCtxCreate a")) return 1;
    if (run(lib, (CUfunction)scale, 3, 1)) return 1;
    if (check(cuCtxCreate_v2(&b, 0, dev), "cuCtxCreate b")) return 1;
    if (check(cuKernelGetFunction(&f, scale), "cuKernelGetFunction")) return 1;
    if (run(lib, f, 7, 1)) return 1;
    if (check(cuCtxDestroy_v2(b), "cuCtxDestroy b")) return 1;
    /* Back in a (destroying b popped it): a's global kept its own value. */
    if (run(lib, (CUfunction)scale, 3, 0)) return 1;
    if (check(cuLibraryUnload(lib), "cuLibraryUnload")) return 1;
    if (check(cuCtxDestroy_v2(a), "cuCtxDestroy a")) return 1;
    printf("library ok\n");
    return 0;
}
