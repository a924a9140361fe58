/* A CUDA runtime (libcudart 13) program as a user would write it, without kernels: it asks the
 * runtime for versions and devices, allocates, fills, copies and frees device memory. It
 * declares the few prototypes it needs (no CUDA headers here). Prints "cudart memory ok" and
 * exits 0 on success; on failure it prints the failing call and the runtime's message. On
 * softcuda, NVIDIA's runtime stops at the first device call (docs/SOFTCUDA.md, "Missing");
 * gpuhost's own runtime (crates/softcudart) runs it through. */
#include <stdio.h>
#include <string.h>

typedef int cudaError_t;
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrComputeCapabilityMajor = 75 };

cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemset(void *ptr, int value, size_t count);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind);
cudaError_t cudaDeviceSynchronize(void);
const char *cudaGetErrorString(cudaError_t error);

#define RT(call)                                                                  \
    do {                                                                          \
        cudaError_t e_ = (call);                                                  \
        if (e_ != 0) {                                                            \
            printf("%s failed: %d (%s)\n", #call, e_, cudaGetErrorString(e_));    \
            return 1;                                                             \
        }                                                                         \
    } while (0)

int main(void) {
    int driver = 0, runtime = 0, count = 0, threads = 0, major = 0;
    RT(cudaDriverGetVersion(&driver));
    RT(cudaRuntimeGetVersion(&runtime));
    printf("driver %d runtime %d\n", driver, runtime);
    RT(cudaGetDeviceCount(&count));
    printf("devices %d\n", count);
    RT(cudaSetDevice(0));
    RT(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerBlock, 0));
    RT(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    printf("max threads %d, compute capability %d.x\n", threads, major);

    enum { N = 4096 };
    unsigned char host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7);
    void *a = NULL, *b = NULL;
    RT(cudaMalloc(&a, N));
    RT(cudaMalloc(&b, N));
    RT(cudaMemset(b, 0x5a, N));
    RT(cudaMemcpy(back, b, N, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
        if (back[i] != 0x5a) {
            printf("memset: byte %d is %d\n", i, back[i]);
            return 1;
        }
    }
    RT(cudaMemcpy(a, host, N, cudaMemcpyHostToDevice));
    RT(cudaMemcpy(b, a, N, cudaMemcpyDeviceToDevice));
    memset(back, 0, N);
    RT(cudaMemcpy(back, b, N, cudaMemcpyDeviceToHost));
    if (memcmp(back, host, N) != 0) {
        printf("round trip differs\n");
        return 1;
    }
    RT(cudaDeviceSynchronize());
    RT(cudaFree(a));
    RT(cudaFree(b));
    printf("cudart memory ok\n");
    return 0;
}
