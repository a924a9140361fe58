// The CUDA runtime's error and stream semantics, as a program relies on them: each call's error
// becomes the calling thread's last error (cudaGetLastError resets it, cudaPeekAtLastError does
// not, another thread has its own), bad launch configurations and copy directions are reported
// as such, streams and events order and time work, cudaLaunchKernel launches through a kernel's
// host stub, `__constant__` and `__device__` variables are reached through their host symbols, a
// second thread gets the device's context on its own, managed memory is shared with the host,
// cudaGetDeviceProperties agrees with cudaDeviceGetAttribute field by field,
// cudaDeviceReset starts the device afresh, and a kernel fault is sticky (a reset does not clear
// it).
// Built with `nvcc -cudart shared`; run against NVIDIA's runtime and driver it is the reference
// for softcudart. Prints "runtime semantics ok" and exits 0 on success; otherwise prints what
// differed and exits 1.
#include <cstdio>
#include <cstring>
#include <thread>

#include "expect.h"

__global__ void iota_from(int *out, int first, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = first + i;
}

__global__ void store_through(int *p) { *p = 1; }

__constant__ int factors[4];
__device__ int visits;

__global__ void scale_by_factors(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] *= factors[i % 4];
        atomicAdd(&visits, 1);
    }
}

int main() {
    if (std::strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") != 0 ||
        std::strcmp(cudaGetErrorString(cudaSuccess), "no error") != 0) {
        std::printf("error names differ\n");
        return 1;
    }

    // The last error: set by a failing call, kept by peek, reset by get.
    EXPECT(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
    EXPECT(cudaPeekAtLastError(), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaSuccess);

    int count = 0;
    EXPECT(cudaGetDeviceCount(&count), cudaSuccess);
    EXPECT(cudaSetDevice(count), cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT(cudaSetDevice(0), cudaSuccess);
    int device = -1;
    EXPECT(cudaGetDevice(&device), cudaSuccess);
    if (device != 0) {
        std::printf("device %d, want 0\n", device);
        return 1;
    }

    // Device properties: each field as cudaDeviceGetAttribute answers it.
    cudaDeviceProp prop;
    std::memset(&prop, 0xff, sizeof prop);
    EXPECT(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT(cudaGetDeviceProperties(&prop, count), cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
    const struct {
        const char *field;
        long long value;
        cudaDeviceAttr attr;
    } fields[] = {
        {"maxThreadsPerBlock", prop.maxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock},
        {"maxThreadsDim[2]", prop.maxThreadsDim[2], cudaDevAttrMaxBlockDimZ},
        {"maxGridSize[1]", prop.maxGridSize[1], cudaDevAttrMaxGridDimY},
        {"sharedMemPerBlock", (long long)prop.sharedMemPerBlock, cudaDevAttrMaxSharedMemoryPerBlock},
        {"warpSize", prop.warpSize, cudaDevAttrWarpSize},
        {"totalConstMem", (long long)prop.totalConstMem, cudaDevAttrTotalConstantMemory},
        {"major", prop.major, cudaDevAttrComputeCapabilityMajor},
        {"minor", prop.minor, cudaDevAttrComputeCapabilityMinor},
        {"multiProcessorCount", prop.multiProcessorCount, cudaDevAttrMultiProcessorCount},
        {"maxTexture2DLinear[2]", prop.maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch},
        {"maxTexture3DAlt[2]", prop.maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt},
        {"maxSurfaceCubemapLayered[1]", prop.maxSurfaceCubemapLayered[1],
         cudaDevAttrMaxSurfaceCubemapLayeredLayers},
        {"surfaceAlignment", (long long)prop.surfaceAlignment, cudaDevAttrSurfaceAlignment},
        {"pciDomainID", prop.pciDomainID, cudaDevAttrPciDomainId},
        {"l2CacheSize", prop.l2CacheSize, cudaDevAttrL2CacheSize},
        {"maxThreadsPerMultiProcessor", prop.maxThreadsPerMultiProcessor,
         cudaDevAttrMaxThreadsPerMultiProcessor},
        {"sharedMemPerMultiprocessor", (long long)prop.sharedMemPerMultiprocessor,
         cudaDevAttrMaxSharedMemoryPerMultiprocessor},
        {"concurrentManagedAccess", prop.concurrentManagedAccess,
         cudaDevAttrConcurrentManagedAccess},
        {"sharedMemPerBlockOptin", (long long)prop.sharedMemPerBlockOptin,
         cudaDevAttrMaxSharedMemoryPerBlockOptin},
        {"maxBlocksPerMultiProcessor", prop.maxBlocksPerMultiProcessor,
         cudaDevAttrMaxBlocksPerMultiprocessor},
        {"reservedSharedMemPerBlock", (long long)prop.reservedSharedMemPerBlock,
         cudaDevAttrReservedSharedMemoryPerBlock},
        {"memoryPoolsSupported", prop.memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported},
        {"clusterLaunch", prop.clusterLaunch, cudaDevAttrClusterLaunch},
        {"hostNumaId", prop.hostNumaId, cudaDevAttrHostNumaId},
        {"gpuPciDeviceID", (long long)(int)prop.gpuPciDeviceID, cudaDevAttrGpuPciDeviceId},
        {"hostNumaMultinodeIpcSupported", prop.hostNumaMultinodeIpcSupported,
         cudaDevAttrHostNumaMultinodeIpcSupported},
    };
    for (const auto &f : fields) {
        int want = -1;
        EXPECT(cudaDeviceGetAttribute(&want, f.attr, 0), cudaSuccess);
        if (f.value != want) {
            std::printf("prop.%s is %lld, the attribute says %d\n", f.field, f.value, want);
            return 1;
        }
    }
    size_t free_mem = 0, total_mem = 0;
    EXPECT(cudaMemGetInfo(&free_mem, &total_mem), cudaSuccess);
    if (prop.name[0] == '\0' || prop.totalGlobalMem != total_mem || free_mem > total_mem) {
        std::printf("name \"%.32s\", totalGlobalMem %zu, cudaMemGetInfo %zu of %zu\n", prop.name,
                    prop.totalGlobalMem, free_mem, total_mem);
        return 1;
    }

    const int n = 1000;
    static int host[n];
    int *d = nullptr;
    EXPECT(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
    EXPECT(cudaMemcpy(host, d, 4, cudaMemcpyKind(7)), cudaErrorInvalidMemcpyDirection);
    EXPECT(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);

    // Launch configurations the device cannot run are reported by cudaGetLastError. NVIDIA's
    // runtime 13 says cudaErrorInvalidValue for both (not cudaErrorInvalidConfiguration), and
    // cudaErrorInvalidResourceHandle for a host function never registered as a kernel (seen on
    // the H200, bench/h200-runs/2026-12-02-s12/).
    iota_from<<<0, 32>>>(d, 0, n);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    iota_from<<<1, 2048>>>(d, 0, n);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT(cudaLaunchKernel((const void *)&holds_iota, dim3(1), dim3(1), nullptr, 0, 0),
           cudaErrorInvalidResourceHandle);
    EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);

    // A stream: fill, kernel, copy back, ordered; events around the kernel time it.
    cudaStream_t s;
    cudaEvent_t start, end;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    EXPECT(cudaEventCreate(&start), cudaSuccess);
    EXPECT(cudaEventCreate(&end), cudaSuccess);
    EXPECT(cudaMemsetAsync(d, 0, n * sizeof(int), s), cudaSuccess);
    EXPECT(cudaEventRecord(start, s), cudaSuccess);
    iota_from<<<(n + 127) / 128, 128, 0, s>>>(d, 5, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaEventRecord(end, s), cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT(cudaStreamQuery(s), cudaSuccess);
    EXPECT(cudaEventQuery(end), cudaSuccess);
    if (!holds_iota(host, 5, n)) return 1;
    float ms = -1.0f;
    EXPECT(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
    if (!(ms >= 0.0f)) {
        std::printf("elapsed %f ms\n", ms);
        return 1;
    }

    // cudaLaunchKernel through the host stub, on the legacy default stream.
    int first = 9, len = n;
    void *args[] = {&d, &first, &len};
    EXPECT(cudaLaunchKernel((const void *)&iota_from, dim3((n + 255) / 256), dim3(256), args, 0, 0),
           cudaSuccess);
    EXPECT(cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDefault), cudaSuccess);
    if (!holds_iota(host, 9, n)) return 1;

    // Variables: copied to and from through their host symbols, bounds-checked.
    const int f[4] = {1, 2, 3, 4};
    int zero = 0, seen = -1, not_a_symbol = 0;
    size_t size = 0;
    void *address = nullptr;
    EXPECT(cudaMemcpyToSymbol(factors, f, sizeof f), cudaSuccess);
    EXPECT(cudaMemcpyToSymbol(visits, &zero, sizeof zero), cudaSuccess);
    EXPECT(cudaGetSymbolSize(&size, factors), cudaSuccess);
    EXPECT(cudaGetSymbolAddress(&address, visits), cudaSuccess);
    if (size != sizeof f || address == nullptr) {
        std::printf("factors: %zu bytes; visits at %p\n", size, address);
        return 1;
    }
    EXPECT(cudaMemcpyToSymbol(factors, f, 8, 12), cudaErrorInvalidValue);
    EXPECT(cudaMemcpyToSymbol(not_a_symbol, f, 4), cudaErrorInvalidSymbol);
    EXPECT(cudaGetLastError(), cudaErrorInvalidSymbol);
    scale_by_factors<<<(n + 127) / 128, 128>>>(d, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMemcpyFromSymbol(&seen, visits, sizeof seen), cudaSuccess);
    EXPECT(cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    if (seen != n) {
        std::printf("visits %d, want %d\n", seen, n);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (host[i] != (9 + i) * f[i % 4]) {
            std::printf("scaled element %d is %d, want %d\n", i, host[i], (9 + i) * f[i % 4]);
            return 1;
        }
    }

    // Another thread: its own last error, and the device's context made current on first use.
    int thread_failed = 1;
    std::thread other([&] {
        if (cudaMalloc(nullptr, 16) != cudaErrorInvalidValue) return;
        if (cudaGetLastError() != cudaErrorInvalidValue) return;
        iota_from<<<(n + 127) / 128, 128>>>(d, 3, n);
        if (cudaGetLastError() != cudaSuccess) return;
        if (cudaDeviceSynchronize() != cudaSuccess) return;
        thread_failed = 0;
    });
    other.join();
    if (thread_failed) {
        std::printf("the second thread's calls failed\n");
        return 1;
    }
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    if (!holds_iota(host, 3, n)) return 1;

    EXPECT(cudaEventDestroy(start), cudaSuccess);
    EXPECT(cudaEventDestroy(end), cudaSuccess);
    EXPECT(cudaStreamDestroy(s), cudaSuccess);
    EXPECT(cudaFree(d), cudaSuccess);

    // Managed memory: written by a kernel, read by the host at the same address.
    // Zero bytes succeed (NVIDIA's runtime 13 on the H200), as they do for cudaMalloc.
    int *shared = nullptr;
    EXPECT(cudaMallocManaged(&shared, 0), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMallocManaged(&shared, n * sizeof(int)), cudaSuccess);
    iota_from<<<(n + 127) / 128, 128>>>(shared, 11, n);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    if (!holds_iota(shared, 11, n)) return 1;
    EXPECT(cudaFree(shared), cudaSuccess);

    // A reset destroys everything; the next calls start a fresh context, kernels included.
    EXPECT(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
    EXPECT(cudaDeviceReset(), cudaSuccess);
    EXPECT(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
    iota_from<<<(n + 127) / 128, 128>>>(d, 2, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    if (!holds_iota(host, 2, n)) return 1;
    EXPECT(cudaMemcpyToSymbol(visits, &zero, sizeof zero), cudaSuccess);
    EXPECT(cudaFree(d), cudaSuccess);

    // A kernel fault is sticky: every later call fails with it. cudaGetLastError returns it once
    // and then success, as NVIDIA's runtime 13 did on the H200, until the next call fails again.
    store_through<<<1, 1>>>(nullptr);
    EXPECT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMalloc(&d, 16), cudaErrorIllegalAddress);
    EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
    // A reset does not recover a faulted device: NVIDIA's driver keeps the fault for the rest
    // of the process (its reset succeeds, then retaining the primary context again answers the
    // fault: crates/conformance/tests/all/sticky.rs on the H200), as NVIDIA documents for these
    // errors ("the process must be terminated and relaunched"). NVIDIA's runtime 13 reports
    // that failed start of a fresh context as the device being unavailable, not as the fault
    // (on the H200, bench/h200-runs/2026-12-02-s14/27dee54).
    EXPECT(cudaDeviceReset(), cudaSuccess);
    EXPECT(cudaMalloc(&d, 16), cudaErrorDevicesUnavailable);
    EXPECT(cudaGetLastError(), cudaErrorDevicesUnavailable);
    return report("runtime semantics");
}
