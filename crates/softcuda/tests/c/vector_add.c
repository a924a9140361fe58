/* A plain driver-API program, as a user would write it: with the cuda.h declarations it needs
 * (cuda_decls.h), it loads a PTX string, launches vector_add and checks the result. Linked with
 * -lcuda; run against softcuda through LD_LIBRARY_PATH. Prints "vector_add ok" and exits 0 on
 * success. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_decls.h"

static const char *PTX =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry vector_add(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<4>;\n"
    "  .reg .b64 %rd<11>;\n"
    "  ld.param.u64 %rd1, [a];\n"
    "  ld.param.u64 %rd2, [b];\n"
    "  ld.param.u64 %rd3, [c];\n"
    "  ld.param.u32 %r2, [n];\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  mov.u32 %r4, %ntid.x;\n"
    "  mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "  setp.ge.s32 %p1, %r1, %r2;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd4, %rd1;\n"
    "  cvta.to.global.u64 %rd5, %rd2;\n"
    "  cvta.to.global.u64 %rd6, %rd3;\n"
    "  mul.wide.s32 %rd7, %r1, 4;\n"
    "  add.s64 %rd8, %rd4, %rd7;\n"
    "  add.s64 %rd9, %rd5, %rd7;\n"
    "  add.s64 %rd10, %rd6, %rd7;\n"
    "  ld.global.f32 %f1, [%rd8];\n"
    "  ld.global.f32 %f2, [%rd9];\n"
    "  add.f32 %f3, %f1, %f2;\n"
    "  st.global.f32 [%rd10], %f3;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#define CHECK(call)                                                                    \
    do {                                                                               \
        CUresult r_ = (call);                                                          \
        if (r_ != 0) {                                                                 \
            const char *name_ = "?";                                                   \
            cuGetErrorName(r_, &name_);                                                \
            fprintf(stderr, "%s failed: %d %s (line %d)\n", #call, r_, name_, __LINE__); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(void) {
    int count = -1;
    /* Before cuInit every call but a few is CUDA_ERROR_NOT_INITIALIZED (3). */
    CUresult early = cuDeviceGetCount(&count);
    printf("before init: %d\n", early);
    if (early != 3) return 1;

    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    char name[64];
    CHECK(cuDeviceGetName(name, sizeof name, dev));
    printf("device: %s\n", name);
    CUcontext ctx;
    CHECK(cuCtxCreate_v2(&ctx, 0, dev));

    size_t free_bytes, total_bytes;
    CHECK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
    printf("total: %zu\n", total_bytes);

    CUmodule module;
    CHECK(cuModuleLoadData(&module, PTX));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, module, "vector_add"));

    enum { N = 4096 };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float)), *c = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) { a[i] = (float)i; b[i] = 0.5f * (float)i; c[i] = -1.0f; }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc_v2(&da, N * sizeof(float)));
    CHECK(cuMemAlloc_v2(&db, N * sizeof(float)));
    CHECK(cuMemAlloc_v2(&dc, N * sizeof(float)));
    CHECK(cuMemcpyHtoD_v2(da, a, N * sizeof(float)));
    CHECK(cuMemcpyHtoD_v2(db, b, N * sizeof(float)));

    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    CHECK(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH_v2(c, dc, N * sizeof(float)));

    for (int i = 0; i < N; i++) {
        if (c[i] != 1.5f * (float)i) {
            fprintf(stderr, "mismatch at %d: %f\n", i, c[i]);
            return 1;
        }
    }
    CHECK(cuMemFree_v2(da));
    CHECK(cuMemFree_v2(db));
    CHECK(cuMemFree_v2(dc));
    CHECK(cuModuleUnload(module));
    CHECK(cuCtxDestroy_v2(ctx));
    free(a); free(b); free(c);
    printf("vector_add ok\n");
    return 0;
}
