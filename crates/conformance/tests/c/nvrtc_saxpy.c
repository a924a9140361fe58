/* A CUDA 13 program as a user would write it: it compiles CUDA C at run time with NVRTC, loads
 * the PTX with the driver API and runs it. It declares the few prototypes it needs (no CUDA
 * headers here); linked with -lcuda and NVRTC's library. Prints "nvrtc saxpy ok" and exits 0 on
 * success; on failure it prints the failing call and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct {
    void *execAffinityParams;
    int numExecAffinityParams;
    void *cigParams;
} CUctxCreateParams;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuCtxCreate_v4(CUcontext *ctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name);
CUresult cuModuleUnload(CUmodule module);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream stream,
                        void **params, void **extra);

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
nvrtcResult nvrtcVersion(int *major, int *minor);
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                               int numHeaders, const char *const *headers,
                               const char *const *includeNames);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size);
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
const char *nvrtcGetErrorString(nvrtcResult result);

#define CU(call)                                                       \
    do {                                                               \
        CUresult r_ = (call);                                          \
        if (r_ != 0) {                                                 \
            printf("%s failed: %d\n", #call, r_);                      \
            return 1;                                                  \
        }                                                              \
    } while (0)

#define RTC(call)                                                            \
    do {                                                                     \
        nvrtcResult r_ = (call);                                             \
        if (r_ != 0) {                                                       \
            printf("%s failed: %s\n", #call, nvrtcGetErrorString(r_));       \
            return 1;                                                        \
        }                                                                    \
    } while (0)

static const char *SOURCE =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

int main(void) {
    int major = 0, minor = 0;
    RTC(nvrtcVersion(&major, &minor));
    printf("nvrtc %d.%d\n", major, minor);

    /* Compile before any driver call: NVRTC looks the driver up on its own. */
    nvrtcProgram prog;
    RTC(nvrtcCreateProgram(&prog, SOURCE, "saxpy.cu", 0, NULL, NULL));
    const char *opts[] = {"--gpu-architecture=compute_90"};
    nvrtcResult compiled = nvrtcCompileProgram(prog, 1, opts);
    size_t log_size = 0;
    RTC(nvrtcGetProgramLogSize(prog, &log_size));
    if (compiled != 0) {
        char *log = malloc(log_size + 1);
        nvrtcGetProgramLog(prog, log);
        printf("nvrtcCompileProgram failed: %s\n%s\n", nvrtcGetErrorString(compiled), log);
        return 1;
    }
    size_t ptx_size = 0;
    RTC(nvrtcGetPTXSize(prog, &ptx_size));
    char *ptx = malloc(ptx_size);
    RTC(nvrtcGetPTX(prog, ptx));
    RTC(nvrtcDestroyProgram(&prog));

    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUctxCreateParams params = {0};
    CUcontext ctx;
    CU(cuCtxCreate_v4(&ctx, &params, 0, dev));
    CUmodule module;
    CU(cuModuleLoadData(&module, ptx));
    CUfunction saxpy;
    CU(cuModuleGetFunction(&saxpy, module, "saxpy"));

    enum { N = 1000 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    CUdeviceptr dx, dy;
    CU(cuMemAlloc_v2(&dx, sizeof x));
    CU(cuMemAlloc_v2(&dy, sizeof y));
    CU(cuMemcpyHtoD_v2(dx, x, sizeof x));
    CU(cuMemcpyHtoD_v2(dy, y, sizeof y));
    float a = 2.0f;
    int n = N;
    void *args[] = {&a, &dx, &dy, &n};
    CU(cuLaunchKernel(saxpy, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(y, dy, sizeof y));
    for (int i = 0; i < N; i++) {
        if (fabsf(y[i] - (2.0f * i + 1.0f)) > 1e-5f) {
            printf("y[%d] = %f, want %f\n", i, y[i], 2.0f * i + 1.0f);
            return 1;
        }
    }
    CU(cuMemFree_v2(dx));
    CU(cuMemFree_v2(dy));
    CU(cuModuleUnload(module));
    CU(cuCtxDestroy_v2(ctx));
    free(ptx);
    printf("nvrtc saxpy ok\n");
    return 0;
}
