// Which part of runtime_features.cu's capture makes NVIDIA's runtime refuse to instantiate it
// (cudaErrorInvalidValue on the H200, 604ab78): the same capture, each variant leaving one
// step out, and the instantiate's answer for each; and what a second cudaStreamEndCapture does
// to the graph handle it is given. Build and run on the GPU machine:
//   nvcc -cudart shared -arch=sm_90 -o /tmp/ci scripts/probes/capture-instantiate.cu && /tmp/ci
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add_one(int *d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] += 1;
}

static void variant(const char *name, bool nested_begin, bool info, bool copy, bool pinned,
                    bool end_twice = false) {
    const int n = 1000;
    int *d = nullptr, *host = nullptr;
    static int pageable[n];
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc(&d, n * sizeof(int));
    if (pinned) cudaMallocHost(&host, n * sizeof(int)); else host = pageable;
    cudaError_t begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaError_t nested = cudaSuccess;
    if (nested_begin) nested = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
    add_one<<<(n + 127) / 128, 128, 0, s>>>(d, n);
    if (info) {
        cudaStreamCaptureStatus st; unsigned long long id = 0;
        const cudaGraphNode_t *deps = nullptr; size_t ndeps = 0;
        cudaStreamGetCaptureInfo(s, &st, &id, nullptr, &deps, nullptr, &ndeps);
    }
    if (copy) cudaMemcpyAsync(host, d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
    cudaGraph_t g = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &g);
    if (end_twice) {
        cudaGraph_t before = g;
        cudaError_t again = cudaStreamEndCapture(s, &g);
        std::printf("  a second cudaStreamEndCapture: %d (%s), graph %s\n", again,
                    cudaGetErrorName(again), g == before ? "unchanged" : g ? "changed" : "set to NULL");
        cudaGetLastError();
        if (!g) g = before;  // still to be instantiated and destroyed
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = g ? cudaGraphInstantiate(&exec, g, 0) : cudaErrorInvalidValue;
    cudaError_t last = cudaGetLastError();
    std::printf("%-34s begin %d nested %d end %d instantiate %d (%s) last %d\n", name, begin,
                nested, end, inst, cudaGetErrorName(inst), last);
    if (exec) cudaGraphExecDestroy(exec);
    if (g) cudaGraphDestroy(g);
    cudaFree(d);
    if (pinned) cudaFreeHost(host);
    cudaStreamDestroy(s);
}

int main() {
    variant("all (as runtime_features.cu)", true, true, true, true);
    variant("no nested begin", false, true, true, true);
    variant("no capture info", true, false, true, true);
    variant("no copy", true, true, false, true);
    variant("kernels only", false, false, false, true);
    variant("pageable copy, no nested begin", false, true, true, false);
    variant("ended twice (the graph kept aside)", false, false, false, true, true);
    return 0;
}
