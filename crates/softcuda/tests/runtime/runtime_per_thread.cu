// The per-thread default stream build (`nvcc --default-stream per-thread`): the runtime's
// headers rename every call that takes a stream to its `_ptsz` form and every synchronous copy
// or fill to its `_ptds` form, and `<<<>>>` launches through `__cudaLaunchKernel_ptsz`; "stream
// 0" is then each host thread's own per-thread default stream. This program uses each renamed
// call the runtime implements and checks its results, then shows that the default stream is
// per thread and not the legacy one: while a kernel on the main thread's default stream waits
// for a word in mapped host memory, a stream the main thread created, and a second thread's
// default stream, each run and finish work of their own; only then is the word set. Were stream
// 0 the legacy stream (or one stream for both threads), that work would wait behind the waiting
// kernel, which gives up after 2^26 polls and reports it.
// Built with `nvcc -cudart shared --default-stream per-thread`; run against NVIDIA's runtime
// and driver it is the reference for softcudart. Prints "runtime per-thread ok" and exits 0 on
// success; otherwise prints what differed and exits 1.
#include <cstdio>
#include <cstring>
#include <thread>

#include "expect.h"

#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build with nvcc --default-stream per-thread"
#endif

// How long the waiting kernel polls before giving up: far longer than the other work takes,
// short enough that a failing run ends.
constexpr unsigned kMaxPolls = 1u << 26;

__global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

__global__ void iota_from(int *out, int first, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = first + i;
}

// Spins until *gate is non-zero (or kMaxPolls polls), then writes how many polls it took.
__global__ void wait_for_gate(const volatile int *gate, unsigned *polls) {
    unsigned n = 0;
    do {
        n++;
    } while (*gate == 0 && n <= kMaxPolls);
    *polls = n;
}

__device__ int counters[4];

// Copies, fills and launches on stream 0, synchronous and stream-ordered.
static int copies_fills_and_launches() {
    constexpr int n = 256;
    int host[n];
    int *dev = nullptr;
    EXPECT(cudaMalloc(&dev, n * sizeof(int)), cudaSuccess);
    for (int i = 0; i < n; i++) host[i] = 10 + i;
    EXPECT(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
    add_one<<<n / 64, 64>>>(dev, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    std::memset(host, 0, sizeof host);
    EXPECT(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(holds_iota(host, 11, n));

    // cudaLaunchKernel and cudaLaunchKernelEx (a template over cudaLaunchKernelExC) on stream 0.
    int first = 100, count = n;
    void *args[] = {&dev, &first, &count};
    EXPECT(cudaLaunchKernel((const void *)iota_from, dim3(n / 64), dim3(64), args, 0, 0),
           cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(holds_iota(host, 100, n));
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(n / 64);
    config.blockDim = dim3(64);
    EXPECT(cudaLaunchKernelEx(&config, add_one, dev, n), cudaSuccess);
    EXPECT(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(holds_iota(host, 101, n));

    // Fills, synchronous and on stream 0.
    EXPECT(cudaMemset(dev, 0, sizeof host), cudaSuccess);
    EXPECT(cudaMemsetAsync(dev, 1, 4 * sizeof(int), 0), cudaSuccess);
    EXPECT(cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    EXPECT(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    EXPECT(cudaStreamQuery(0), cudaSuccess);
    CHECK(host[0] == 0x01010101 && host[3] == 0x01010101 && host[4] == 0 && host[n - 1] == 0);

    // A __device__ array through its symbol.
    int in[4] = {7, 8, 9, 10}, out[4] = {};
    EXPECT(cudaMemcpyToSymbol(counters, in, sizeof in), cudaSuccess);
    EXPECT(cudaMemcpyFromSymbol(out, counters, 2 * sizeof(int), 2 * sizeof(int)), cudaSuccess);
    CHECK(out[0] == 9 && out[1] == 10);
    in[0] = 70;
    EXPECT(cudaMemcpyToSymbolAsync(counters, in, sizeof(int), 0, cudaMemcpyHostToDevice, 0),
           cudaSuccess);
    EXPECT(cudaMemcpyFromSymbolAsync(out, counters, sizeof(int), 0, cudaMemcpyDeviceToHost, 0),
           cudaSuccess);
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(out[0] == 70);

    // Pitched copies and fills.
    unsigned char *pitched = nullptr;
    size_t pitch = 0;
    constexpr int w = 40, h = 3;
    unsigned char rows[h][w];
    EXPECT(cudaMallocPitch((void **)&pitched, &pitch, w, h), cudaSuccess);
    EXPECT(cudaMemset2D(pitched, pitch, 0x5a, w, h), cudaSuccess);
    EXPECT(cudaMemset2DAsync(pitched, pitch, 0x11, w / 2, h, 0), cudaSuccess);
    EXPECT(cudaMemcpy2DAsync(rows, w, pitched, pitch, w, h, cudaMemcpyDeviceToHost, 0),
           cudaSuccess);
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(rows[0][0] == 0x11 && rows[2][w / 2 - 1] == 0x11 && rows[2][w / 2] == 0x5a);
    std::memset(rows, 0x33, sizeof rows);
    EXPECT(cudaMemcpy2D(pitched, pitch, rows, w, w, h, cudaMemcpyHostToDevice), cudaSuccess);
    unsigned char back = 0;
    EXPECT(cudaMemcpy(&back, pitched + 2 * pitch + w - 1, 1, cudaMemcpyDeviceToHost),
           cudaSuccess);
    CHECK(back == 0x33);
    EXPECT(cudaFree(pitched), cudaSuccess);
    EXPECT(cudaFree(dev), cudaSuccess);
    return 0;
}

// Events, host functions, callbacks, stream-ordered allocation and graphs on stream 0.
static int stream_work() {
    cudaEvent_t done;
    EXPECT(cudaEventCreate(&done), cudaSuccess);
    int calls = 0;
    EXPECT(cudaLaunchHostFunc(0, count_call, &calls), cudaSuccess);
    EXPECT(cudaStreamAddCallback(0, count_callback, &calls, 0), cudaSuccess);
    EXPECT(cudaEventRecord(done, 0), cudaSuccess);
    EXPECT(cudaEventSynchronize(done), cudaSuccess);
    CHECK(calls == 2);
    EXPECT(cudaEventRecordWithFlags(done, 0, cudaEventRecordDefault), cudaSuccess);
    cudaStream_t other;
    EXPECT(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    EXPECT(cudaStreamWaitEvent(other, done, 0), cudaSuccess);
    EXPECT(cudaStreamWaitEvent(0, done, 0), cudaSuccess);
    unsigned flags = 99;
    int priority = 99;
    EXPECT(cudaStreamGetFlags(other, &flags), cudaSuccess);
    CHECK(flags == cudaStreamNonBlocking);
    EXPECT(cudaStreamGetFlags(0, &flags), cudaSuccess);
    EXPECT(cudaStreamGetPriority(0, &priority), cudaSuccess);

    // Stream-ordered allocation on stream 0.
    constexpr int n = 64;
    int *buf = nullptr, host[n];
    EXPECT(cudaMallocAsync((void **)&buf, n * sizeof(int), 0), cudaSuccess);
    iota_from<<<1, n>>>(buf, 5, n);
    EXPECT(cudaMemcpyAsync(host, buf, sizeof host, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    EXPECT(cudaFreeAsync(buf, 0), cudaSuccess);
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(holds_iota(host, 5, n));

    // A graph captured on a created stream, uploaded to and launched on stream 0.
    int *dev = nullptr;
    EXPECT(cudaMalloc(&dev, n * sizeof(int)), cudaSuccess);
    EXPECT(cudaMemset(dev, 0, n * sizeof(int)), cudaSuccess);
    EXPECT(cudaStreamBeginCapture(other, cudaStreamCaptureModeGlobal), cudaSuccess);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT(cudaStreamIsCapturing(other, &status), cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusActive);
    add_one<<<1, n, 0, other>>>(dev, n);
    unsigned long long id = 0;
    EXPECT(cudaStreamGetCaptureInfo(other, &status, &id), cudaSuccess);
    CHECK(status == cudaStreamCaptureStatusActive && id != 0);
    add_one<<<1, n, 0, other>>>(dev, n);
    cudaGraph_t graph;
    EXPECT(cudaStreamEndCapture(other, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    EXPECT(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    EXPECT(cudaGraphUpload(exec, 0), cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, 0), cudaSuccess);
    EXPECT(cudaGraphLaunch(exec, 0), cudaSuccess);
    EXPECT(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(host[0] == 4 && host[n - 1] == 4);
    EXPECT(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT(cudaGraphDestroy(graph), cudaSuccess);
    EXPECT(cudaFree(dev), cudaSuccess);
    EXPECT(cudaStreamDestroy(other), cudaSuccess);
    EXPECT(cudaEventDestroy(done), cudaSuccess);
    return 0;
}

// Work of a thread's own: its default stream is idle until it queues something, then runs
// while the main thread's default stream is still waiting.
static int second_thread(int *dev, int n, volatile int *gate) {
    EXPECT(cudaStreamQuery(0), cudaSuccess);
    iota_from<<<1, n>>>(dev, 1000, n);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    int host[64];
    EXPECT(cudaMemcpy(host, dev, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(holds_iota(host, 1000, n));
    *gate = 1;
    return 0;
}

// The main thread's default stream waits on a gate; another stream and another thread's
// default stream do not wait for it.
static int default_streams_are_per_thread() {
    volatile int *gate = nullptr;
    unsigned *polls = nullptr;
    EXPECT(cudaHostAlloc((void **)&gate, sizeof(int), cudaHostAllocMapped), cudaSuccess);
    EXPECT(cudaHostAlloc((void **)&polls, sizeof(unsigned), cudaHostAllocMapped), cudaSuccess);
    *gate = 0;
    *polls = 0;
    int *dgate = nullptr;
    unsigned *dpolls = nullptr;
    EXPECT(cudaHostGetDevicePointer((void **)&dgate, (void *)gate, 0), cudaSuccess);
    EXPECT(cudaHostGetDevicePointer((void **)&dpolls, polls, 0), cudaSuccess);
    constexpr int n = 64;
    int *mine = nullptr, *theirs = nullptr;
    EXPECT(cudaMalloc(&mine, n * sizeof(int)), cudaSuccess);
    EXPECT(cudaMalloc(&theirs, n * sizeof(int)), cudaSuccess);

    wait_for_gate<<<1, 1>>>(dgate, dpolls);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaStreamQuery(0), cudaErrorNotReady);
    // "Not ready" answers the query; it is not an error, so it is not the thread's last error.
    EXPECT(cudaPeekAtLastError(), cudaSuccess);

    // A blocking stream of this thread's own does not wait for its default stream.
    cudaStream_t created;
    EXPECT(cudaStreamCreate(&created), cudaSuccess);
    iota_from<<<1, n, 0, created>>>(mine, 50, n);
    EXPECT(cudaStreamSynchronize(created), cudaSuccess);
    int host[n];
    EXPECT(cudaMemcpyAsync(host, mine, sizeof host, cudaMemcpyDeviceToHost, created),
           cudaSuccess);
    EXPECT(cudaStreamSynchronize(created), cudaSuccess);
    CHECK(holds_iota(host, 50, n));
    EXPECT(cudaStreamQuery(0), cudaErrorNotReady);

    // Another thread's default stream is another stream; it opens the gate when done.
    int failed = 0;
    std::thread other([&] { failed = second_thread(theirs, n, gate); });
    other.join();
    if (failed) *gate = 1;  // let the waiting kernel go before reporting
    EXPECT(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(!failed);
    if (*polls > kMaxPolls) {
        std::printf("the default stream's kernel gave up: the other work waited for it\n");
        return 1;
    }
    CHECK(*polls >= 1);
    EXPECT(cudaStreamDestroy(created), cudaSuccess);
    EXPECT(cudaFree(mine), cudaSuccess);
    EXPECT(cudaFree(theirs), cudaSuccess);
    EXPECT(cudaFreeHost((void *)gate), cudaSuccess);
    EXPECT(cudaFreeHost(polls), cudaSuccess);
    return 0;
}

int main() {
    if (copies_fills_and_launches() || stream_work() || default_streams_are_per_thread())
        return 1;
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaSuccess);
    return report("runtime per-thread");
}
