// The runtime calls real programs use beyond the basics (runtime_semantics.cu has those): device
// initialisation, flags and limits; stream priorities, event-record flags and host functions;
// stream-ordered allocation and the default memory pool; function attributes, dynamic shared
// memory, cache preferences and occupancy (cudaOccupancyMaxPotentialBlockSize is a header
// template over them); pitched memory and 2D copies and fills; host registration and pointer
// attributes; peer copies; stream callbacks; the profiler's start and stop; cudaLaunchKernelEx
// with launch attributes; stream capture into a graph (its status, progress and the thread's
// capture mode), and a graph built node by node, instantiated, uploaded, launched and updated.
// Built with `nvcc -cudart shared`; run against NVIDIA's runtime and driver it is the reference
// for softcudart. Prints "runtime features ok" and exits 0 on success; otherwise prints each
// call whose answer differed (with its line) and exits 1.
// Hostile inputs are only those NVIDIA's runtime documents an error for (a NULL out-pointer
// where the call lists cudaErrorInvalidValue, a host function where it lists
// cudaErrorInvalidDeviceFunction, a bad flag, device or limit): NVIDIA's runtime does not check
// the rest (the program crashed under it on the H200 with some in: 27dee54); softcudart refuses
// those too, and its unit tests check that.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "expect.h"

// cuda_profiler_api.h's two calls (that header is not in the nvcc wheels CI installs).
extern "C" cudaError_t cudaProfilerStart(void);
extern "C" cudaError_t cudaProfilerStop(void);

__global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

__global__ void iota_from(int *out, int first, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = first + i;
}

// Sums 0..blockDim.x-1 through `words` ints of dynamic shared memory (the last one each thread
// can reach is touched, so a launch with too little would fault).
__global__ void sum_through_shared(int *out, int words) {
    extern __shared__ int scratch[];
    scratch[threadIdx.x] = threadIdx.x;
    scratch[words - 1 - threadIdx.x] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < blockDim.x; i++) s += scratch[i];
        *out = s;
    }
}

// Row y of a pitched 2D buffer gets bytes (x + 3y) & 0xff.
__global__ void fill_rows(unsigned char *p, size_t pitch, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < width && y < height) p[y * pitch + x] = (unsigned char)(x + 3 * y);
}

// Device initialisation, flags, limits and stream priorities.
static int device_settings(int count) {
    EXPECT(cudaInitDevice(0, 0, 0), cudaSuccess);
    FAILS(cudaInitDevice(count, 0, 0), cudaErrorInvalidDevice);
    EXPECT(cudaSetDevice(0), cudaSuccess);
    EXPECT(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
    unsigned flags = 0;
    EXPECT(cudaGetDeviceFlags(&flags), cudaSuccess);
    // cudaDeviceMapHost may be reported too: it is implicit in the runtime.
    CHECK((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync);
    FAILS(cudaSetDeviceFlags(0x10000), cudaErrorInvalidValue);
    EXPECT(cudaSetDeviceFlags(cudaDeviceScheduleAuto), cudaSuccess);

    size_t stack = 0, heap = 0;
    EXPECT(cudaDeviceGetLimit(&stack, cudaLimitStackSize), cudaSuccess);
    CHECK(stack > 0);
    EXPECT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20), cudaSuccess);
    EXPECT(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize), cudaSuccess);
    CHECK(heap >= (16 << 20));
    FAILS(cudaDeviceGetLimit(&heap, cudaLimit(0x7777)), cudaErrorInvalidValue);
    FAILS(cudaDeviceGetLimit(nullptr, cudaLimitStackSize), cudaErrorInvalidValue);

    int least = 1, greatest = 1;
    EXPECT(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    CHECK(greatest <= least);
    EXPECT(cudaDeviceGetStreamPriorityRange(nullptr, nullptr), cudaSuccess);
    cudaStream_t s;
    EXPECT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest), cudaSuccess);
    int priority = 1;
    unsigned stream_flags = 7;
    EXPECT(cudaStreamGetPriority(s, &priority), cudaSuccess);
    EXPECT(cudaStreamGetFlags(s, &stream_flags), cudaSuccess);
    CHECK(priority == greatest && stream_flags == cudaStreamNonBlocking);
    FAILS(cudaStreamGetFlags(s, nullptr), cudaErrorInvalidValue);
    EXPECT(cudaStreamDestroy(s), cudaSuccess);
    return 0;
}

// Host functions and event-record flags on a stream; stream-ordered allocation and the pool.
static int stream_work(int count) {
    const int n = 1000;
    static int host[n];
    cudaStream_t s;
    cudaEvent_t done;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    EXPECT(cudaEventCreate(&done), cudaSuccess);

    int *d = nullptr;
    EXPECT(cudaMallocAsync(reinterpret_cast<void **>(&d), n * sizeof(int), s), cudaSuccess);
    FAILS(cudaMallocAsync(nullptr, 16, s), cudaErrorInvalidValue);
    iota_from<<<(n + 127) / 128, 128, 0, s>>>(d, 4, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    int calls = 0;
    EXPECT(cudaLaunchHostFunc(s, count_call, &calls), cudaSuccess);
    FAILS(cudaLaunchHostFunc(s, nullptr, nullptr), cudaErrorInvalidValue);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT(cudaStreamAddCallback(s, count_callback, &calls, 0), cudaSuccess);
    FAILS(cudaStreamAddCallback(s, count_callback, &calls, 1), cudaErrorInvalidValue);
    EXPECT(cudaFreeAsync(d, s), cudaSuccess);
    EXPECT(cudaEventRecordWithFlags(done, s, cudaEventRecordDefault), cudaSuccess);
    EXPECT(cudaEventSynchronize(done), cudaSuccess);
    CHECK(calls == 2);
    if (!holds_iota(host, 4, n)) return 1;

    cudaMemPool_t pool = nullptr;
    EXPECT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    FAILS(cudaDeviceGetDefaultMemPool(&pool, count), cudaErrorInvalidDevice);
    unsigned long long threshold = 1 << 20, seen = 0;
    EXPECT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
    EXPECT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &seen), cudaSuccess);
    CHECK(seen == threshold);
    EXPECT(cudaMemPoolTrimTo(pool, 0), cudaSuccess);

    EXPECT(cudaEventDestroy(done), cudaSuccess);
    EXPECT(cudaStreamDestroy(s), cudaSuccess);
    return 0;
}

// Function attributes, the dynamic shared memory opt-in, occupancy.
static int functions(const cudaDeviceProp &prop) {
    cudaFuncAttributes attr;
    std::memset(&attr, 0xff, sizeof attr);
    EXPECT(cudaFuncGetAttributes(&attr, sum_through_shared), cudaSuccess);
    CHECK(attr.maxThreadsPerBlock > 0 && attr.maxThreadsPerBlock <= prop.maxThreadsPerBlock);
    CHECK(attr.ptxVersion >= 10 && attr.maxDynamicSharedSizeBytes > 0);
    // A host function never registered as a kernel: as a launch of one answers.
    FAILS(cudaFuncGetAttributes(&attr, (const void *)&holds_iota), cudaErrorInvalidResourceHandle);

    int *out = nullptr, sum = 0;
    EXPECT(cudaMalloc(&out, sizeof(int)), cudaSuccess);
    // More dynamic shared memory than a block gets by default: refused until opted in.
    const int optin = int(prop.sharedMemPerBlockOptin) - int(attr.sharedSizeBytes);
    const int words = optin / 4;
    CHECK(optin > 48 * 1024);
    sum_through_shared<<<1, 64, words * 4>>>(out, words);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    FAILS(cudaFuncSetAttribute(sum_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin + 1),
           cudaErrorInvalidValue);
    EXPECT(cudaFuncSetAttribute(sum_through_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                optin),
           cudaSuccess);
    EXPECT(cudaFuncGetAttributes(&attr, sum_through_shared), cudaSuccess);
    CHECK(attr.maxDynamicSharedSizeBytes == optin);
    sum_through_shared<<<1, 64, words * 4>>>(out, words);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMemcpy(&sum, out, sizeof sum, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(sum == 64 * 63 / 2);
    EXPECT(cudaFree(out), cudaSuccess);

    // Cache preferences: recorded (a CPU has no cache split to choose).
    EXPECT(cudaFuncSetCacheConfig(add_one, cudaFuncCachePreferShared), cudaSuccess);
    FAILS(cudaFuncSetCacheConfig((const void *)&holds_iota, cudaFuncCachePreferShared),
          cudaErrorInvalidResourceHandle);
    cudaFuncCache cache = cudaFuncCachePreferEqual;
    EXPECT(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1), cudaSuccess);
    EXPECT(cudaDeviceGetCacheConfig(&cache), cudaSuccess);
    EXPECT(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone), cudaSuccess);

    int blocks = 0, min_grid = 0, block = 0;
    EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_one, 256, 0), cudaSuccess);
    CHECK(blocks > 0 && blocks * 256 <= prop.maxThreadsPerMultiProcessor);
    EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, add_one, 256, 0,
                                                                  cudaOccupancyDisableCachingOverride),
           cudaSuccess);
    FAILS(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, add_one, 256, 0, 8),
          cudaErrorInvalidValue);
    EXPECT(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, add_one), cudaSuccess);
    CHECK(block > 0 && block <= prop.maxThreadsPerBlock && min_grid > 0);
    size_t dynamic = 0;
    EXPECT(cudaOccupancyAvailableDynamicSMemPerBlock(&dynamic, add_one, 1, 128), cudaSuccess);
    CHECK(dynamic > 0);
    return 0;
}

// Pitched memory: 2D fills and copies both ways, checked against a kernel's writes.
static int pitched() {
    const int width = 100, height = 7;
    static unsigned char rows[height][width], padded[height][128];
    unsigned char *p = nullptr;
    size_t pitch = 0;
    EXPECT(cudaMallocPitch(reinterpret_cast<void **>(&p), &pitch, width, height), cudaSuccess);
    CHECK(pitch >= width);
    EXPECT(cudaMemset2D(p, pitch, 0x5a, width, height), cudaSuccess);
    EXPECT(cudaMemcpy2D(rows, width, p, pitch, width, height, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) CHECK(rows[y][x] == 0x5a);
    fill_rows<<<dim3(1, height), 128>>>(p, pitch, width, height);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMemcpy2D(padded, 128, p, pitch, width, height, cudaMemcpyDefault), cudaSuccess);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) CHECK(padded[y][x] == (unsigned char)(x + 3 * y));
    // Host to device on a stream, then back through a device-to-device 2D copy.
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) rows[y][x] = (unsigned char)(7 * x + y);
    EXPECT(cudaMemcpy2DAsync(p, pitch, rows, width, width, height, cudaMemcpyHostToDevice, 0),
           cudaSuccess);
    unsigned char *q = nullptr;
    EXPECT(cudaMalloc(&q, width * height), cudaSuccess);
    EXPECT(cudaMemset2DAsync(q, width, 0, width, height, 0), cudaSuccess);
    EXPECT(cudaMemcpy2D(q, width, p, pitch, width, height, cudaMemcpyDeviceToDevice), cudaSuccess);
    std::memset(rows, 0, sizeof rows);
    EXPECT(cudaMemcpy(rows, q, width * height, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++) CHECK(rows[y][x] == (unsigned char)(7 * x + y));
    // A row wider than a pitch, and an unknown direction.
    FAILS(cudaMemcpy2D(rows, width - 1, p, pitch, width, height, cudaMemcpyDeviceToHost),
          cudaErrorInvalidPitchValue);
    FAILS(cudaMemcpy2D(rows, width, p, pitch, width, height, cudaMemcpyKind(7)),
          cudaErrorInvalidMemcpyDirection);
    FAILS(cudaMemset2D(p, width - 1, 0, width, height), cudaErrorInvalidValue);
    FAILS(cudaMallocPitch(nullptr, &pitch, width, height), cudaErrorInvalidValue);
    EXPECT(cudaFree(q), cudaSuccess);
    EXPECT(cudaFree(p), cudaSuccess);
    return 0;
}

// Registered host memory written by a kernel; what cudaPointerGetAttributes says of each kind.
static int host_memory(int count) {
    const int n = 1024;
    int *buf = static_cast<int *>(std::aligned_alloc(4096, n * sizeof(int)));
    CHECK(buf != nullptr);
    EXPECT(cudaHostRegister(buf, n * sizeof(int), cudaHostRegisterDefault), cudaSuccess);
    FAILS(cudaHostRegister(buf, n * sizeof(int), cudaHostRegisterDefault),
          cudaErrorHostMemoryAlreadyRegistered);
    int *mapped = nullptr;
    EXPECT(cudaHostGetDevicePointer(reinterpret_cast<void **>(&mapped), buf, 0), cudaSuccess);
    iota_from<<<n / 128, 128>>>(mapped, 6, n);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    if (!holds_iota(buf, 6, n)) return 1;

    cudaPointerAttributes a;
    EXPECT(cudaPointerGetAttributes(&a, buf), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeHost && a.hostPointer == buf && a.devicePointer == mapped);
    EXPECT(cudaHostUnregister(buf), cudaSuccess);
    FAILS(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
    EXPECT(cudaPointerGetAttributes(&a, buf), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeUnregistered);
    std::free(buf);

    int *d = nullptr, *m = nullptr;
    EXPECT(cudaMalloc(&d, 4096), cudaSuccess);
    EXPECT(cudaPointerGetAttributes(&a, d + 10), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == d + 10 &&
          a.hostPointer == nullptr);
    EXPECT(cudaMallocManaged(&m, 4096), cudaSuccess);
    EXPECT(cudaPointerGetAttributes(&a, m), cudaSuccess);
    CHECK(a.type == cudaMemoryTypeManaged && a.devicePointer == m && a.hostPointer == m);
    FAILS(cudaPointerGetAttributes(nullptr, d), cudaErrorInvalidValue);

    // A peer copy within the one device.
    iota_from<<<1, 1024>>>(d, 8, 1024);
    EXPECT(cudaMemcpyPeer(m, 0, d, 0, 4096), cudaSuccess);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    if (!holds_iota(m, 8, 1024)) return 1;
    iota_from<<<1, 1024>>>(d, 9, 1024);
    EXPECT(cudaMemcpyPeerAsync(m, 0, d, 0, 4096, 0), cudaSuccess);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    if (!holds_iota(m, 9, 1024)) return 1;
    int can = -1;
    EXPECT(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
    CHECK(can == 0);  // a device is not its own peer
    FAILS(cudaDeviceCanAccessPeer(&can, 0, count), cudaErrorInvalidDevice);
    EXPECT(cudaFree(m), cudaSuccess);
    EXPECT(cudaFree(d), cudaSuccess);
    return 0;
}

// A capture replayed as a graph; a graph built node by node, launched, then updated.
static int graphs() {
    const int n = 1000;
    static int host[n];
    int *d = nullptr;
    cudaStream_t s;
    EXPECT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    EXPECT(cudaMalloc(&d, n * sizeof(int)), cudaSuccess);
    // cudaLaunchKernelEx (a template over cudaLaunchKernelExC), with a launch attribute.
    cudaLaunchAttribute priority[1] = {};
    priority[0].id = cudaLaunchAttributePriority;
    priority[0].val.priority = 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((n + 127) / 128);
    config.blockDim = dim3(128);
    config.stream = s;
    config.attrs = priority;
    config.numAttrs = 1;
    EXPECT(cudaLaunchKernelEx(&config, iota_from, d, 0, n), cudaSuccess);
    config.blockDim = dim3(0);
    FAILS(cudaLaunchKernelEx(&config, iota_from, d, 0, n), cudaErrorInvalidValue);

    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    EXPECT(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    CHECK(mode == cudaStreamCaptureModeGlobal);  // each thread starts in global mode
    EXPECT(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    CHECK(mode == cudaStreamCaptureModeRelaxed);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    EXPECT(cudaStreamIsCapturing(s, &status), cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
    EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT(cudaStreamIsCapturing(s, &status), cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusActive);
    FAILS(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
    add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
    unsigned long long id = 0;
    const cudaGraphNode_t *deps = nullptr;
    size_t ndeps = 0;
    // (Not the graph so far: softcuda answers NULL for it until the capture ends.)
    EXPECT(cudaStreamGetCaptureInfo(s, &status, &id, nullptr, &deps, nullptr, &ndeps),
           cudaSuccess);
    // The second kernel is all the next work depends on.
    CHECK(status == cudaStreamCaptureStatusActive && id != 0 && ndeps == 1 && deps != nullptr);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    cudaGraph_t captured = nullptr;
    EXPECT(cudaStreamEndCapture(s, &captured), cudaSuccess);
    CHECK(captured != nullptr);
    EXPECT(cudaStreamGetCaptureInfo(s, &status), cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusNone);
    // A failed end sets the graph it is given to NULL (NVIDIA's runtime on the H200,
    // scripts/probes/capture-instantiate.cu).
    cudaGraph_t ended = captured;
    FAILS(cudaStreamEndCapture(s, &ended), cudaErrorIllegalState);
    CHECK(ended == nullptr);
    FAILS(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
          cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(host[n - 1] == 0);  // the captured copy ran only when the graph is launched

    cudaGraphExec_t exec = nullptr;
    EXPECT(cudaGraphInstantiate(&exec, captured, 0), cudaSuccess);
    FAILS(cudaGraphInstantiate(nullptr, captured, 0), cudaErrorInvalidValue);
    for (int i = 0; i < 3; i++) EXPECT(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    if (!holds_iota(host, 6, n)) return 1;
    EXPECT(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT(cudaGraphDestroy(captured), cudaSuccess);

    // A graph of one kernel node, built by hand; its instance's launch changed in place.
    cudaGraph_t g = nullptr;
    EXPECT(cudaGraphCreate(&g, 0), cudaSuccess);
    int first = 20, len = n;
    void *args[] = {&d, &first, &len};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)iota_from;
    kp.gridDim = dim3((n + 127) / 128);
    kp.blockDim = dim3(128);
    kp.kernelParams = args;
    cudaGraphNode_t node = nullptr;
    EXPECT(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp), cudaSuccess);
    EXPECT(cudaGraphInstantiateWithFlags(&exec, g, 0), cudaSuccess);
    EXPECT(cudaGraphUpload(exec, s), cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    if (!holds_iota(host, 20, n)) return 1;
    first = 30;  // the node copied its arguments when added: this changes nothing by itself
    EXPECT(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    if (!holds_iota(host, 20, n)) return 1;
    EXPECT(cudaGraphExecKernelNodeSetParams(exec, node, &kp), cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, s), cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), cudaSuccess);
    if (!holds_iota(host, 30, n)) return 1;
    kp.func = (void *)&holds_iota;  // not a kernel
    FAILS(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp), cudaErrorInvalidResourceHandle);
    EXPECT(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT(cudaGraphDestroy(g), cudaSuccess);
    EXPECT(cudaFree(d), cudaSuccess);
    EXPECT(cudaStreamDestroy(s), cudaSuccess);
    return 0;
}

int main() {
    int count = 0;
    EXPECT(cudaGetDeviceCount(&count), cudaSuccess);
    cudaDeviceProp prop;
    EXPECT(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT(cudaProfilerStart(), cudaSuccess);
    EXPECT(cudaProfilerStop(), cudaSuccess);
    if (device_settings(count) || stream_work(count) || functions(prop) || pitched() ||
        host_memory(count) || graphs())
        return 1;
    EXPECT(cudaGetLastError(), cudaSuccess);
    return report("runtime features");
}
