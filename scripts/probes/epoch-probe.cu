// Why the sandbox's entry epoch read costs short kernels ~1 µs on the H200 (issue #9).
//
// sandbox_bench --ablate (bench/h200-runs/2026-12-01-s8/027483b-final) showed that taking the
// prologue's one 4-byte epoch load out of softmax_rows cut its graph-replayed time from 3.72 to
// 2.64 µs (native 2.31), although the compare that waits for it sits before the kernel's first
// global store, after its loads and a block reduction. This probe runs the same softmax_rows
// kernel (corpus/softmax_rows.cu, 37 rows x 300, 128 threads) with an epoch load added in the
// sandbox's way, varying where the word lives and where the compare is:
//   where: dev   - a cudaMalloc of its own (what sandbox_bench uses);
//          arena - the same allocation as the kernel's input, past its data;
//          mgd   - managed memory of this context, preferred on the device, prefetched there;
//          priv  - managed memory of a private context, zeroed by the CPU and advised as
//                  gpuhost's ControlPool does (the host window preferred on the device);
//          host  - pinned host memory, mapped;
//   how:   first - loaded first, compared before the first global store (the sandbox today);
//          end   - loaded first, compared after the last store (nothing waits for it early);
//          late  - loaded right before the first global store, compared there.
// Times are graph replays of 64 launches, per launch, median of 9, after warm-up.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/epoch-probe scripts/probes/epoch-probe.cu -lcuda && /tmp/epoch-probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "../../corpus/block_reduce.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char* s_ = 0; \
  cuGetErrorName(e_, &s_); printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)

enum How { NONE = 0, FIRST = 1, END = 2, LATE = 3 };

__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int HOW>
__global__ void softmax(const float* __restrict__ in, float* __restrict__ out, int rows, int cols,
                        const unsigned* ctl, unsigned epoch) {
  __shared__ float red[32];
  unsigned e = epoch;
  if (HOW == FIRST || HOW == END) e = ld_volatile(ctl);
  int row = blockIdx.x;
  if (row >= rows) return;
  const float* x = in + (long long)row * cols;
  float* y = out + (long long)row * cols;
  float m = -CORPUS_FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
  m = block_max(m, red);
  if (HOW == LATE) e = ld_volatile(ctl);
  if ((HOW == FIRST || HOW == LATE) && e != epoch) return;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = __expf(x[c] - m);
    y[c] = v;
    s += v;
  }
  s = block_sum(s, red);
  float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] *= inv;
  if (HOW == END && e != epoch && threadIdx.x == 0) y[0] = -1.0f;
}

typedef void (*Kernel)(const float*, float*, int, int, const unsigned*, unsigned);

static const int ROWS = 37, COLS = 300, THREADS = 128, LAUNCHES = 64, REPLAYS = 20, SAMPLES = 9;

// Median µs per launch of `k` replayed as a graph of LAUNCHES launches.
static double time_graph(Kernel k, cudaStream_t s, const float* in, float* out, const unsigned* ctl) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < LAUNCHES; i++) k<<<ROWS, THREADS, 0, s>>>(in, out, ROWS, COLS, ctl, 0);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  std::vector<double> us;
  for (int r = 0; r < SAMPLES; r++) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < REPLAYS; i++) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1e3 / (LAUNCHES * REPLAYS));
  }
  std::sort(us.begin(), us.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return us[SAMPLES / 2];
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  CUcontext primary;
  CD(cuCtxGetCurrent(&primary));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  size_t n = (size_t)ROWS * COLS;
  std::vector<float> h(n);
  for (size_t i = 0; i < n; i++) h[i] = (float)((i * 2654435761u) % 1600) / 100.0f - 8.0f;
  // The input with 64 KiB of room past its data for the "arena" word.
  float *in, *out;
  CK(cudaMalloc(&in, n * 4 + 65536));
  CK(cudaMalloc(&out, n * 4));
  CK(cudaMemcpy(in, h.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset((char*)in + n * 4, 0, 65536));

  unsigned* dev;
  CK(cudaMalloc(&dev, 4096));
  CK(cudaMemset(dev, 0, 4096));
  unsigned* arena = (unsigned*)((char*)in + ((n * 4 + 4095) & ~size_t(4095)));

  cudaMemLocation d0 = {};
  d0.type = cudaMemLocationTypeDevice;
  d0.id = 0;
  unsigned* mgd;
  CK(cudaMallocManaged(&mgd, 4096));
  CK(cudaMemAdvise(mgd, 4096, cudaMemAdviseSetPreferredLocation, d0));
  CK(cudaMemAdvise(mgd, 4096, cudaMemAdviseSetAccessedBy, d0));
  mgd[0] = 0;
  CK(cudaMemPrefetchAsync(mgd, 4096, d0, 0, s));
  CK(cudaStreamSynchronize(s));

  // gpuhost's ControlPool: managed memory of a private context, advised to the device, written
  // by the CPU (its pool zeroes a block for each new user with CPU stores).
  CUdevice cu_dev;
  CD(cuDeviceGet(&cu_dev, 0));
  CUcontext private_ctx;
  CD(cuCtxCreate(&private_ctx, nullptr, 0, cu_dev));
  CUdeviceptr priv_ptr;
  CD(cuMemAllocManaged(&priv_ptr, 4 << 20, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation cl = {};
  cl.type = CU_MEM_LOCATION_TYPE_DEVICE;
  cl.id = 0;
  memset((void*)priv_ptr, 0, 4 << 20);
  CD(cuMemAdvise(priv_ptr, 2 << 20, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cl));
  CD(cuCtxSetCurrent(primary));
  unsigned* priv = (unsigned*)priv_ptr;

  unsigned* host;
  CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped));
  host[0] = 0;
  unsigned* host_dev;
  CK(cudaHostGetDevicePointer(&host_dev, host, 0));

  struct Where { const char* name; const unsigned* p; } wheres[] = {
      {"dev", dev}, {"arena", arena}, {"mgd", mgd}, {"priv", priv}, {"host", host_dev}};
  struct HowK { const char* name; Kernel k; } hows[] = {
      {"first", softmax<FIRST>}, {"end", softmax<END>}, {"late", softmax<LATE>}};

  printf("softmax_rows %dx%d, %d threads: graph replay, us per launch (median of %d)\n", ROWS, COLS,
         THREADS, SAMPLES);
  for (int round = 0; round < 2; round++) {
    double native = time_graph(softmax<NONE>, s, in, out, dev);
    printf("\nround %d: native %.3f us\n%-8s", round + 1, native, "where");
    for (auto& h : hows) printf(" %14s", h.name);
    printf("\n");
    for (auto& w : wheres) {
      printf("%-8s", w.name);
      for (auto& h : hows) {
        double t = time_graph(h.k, s, in, out, w.p);
        printf("   %5.3f (%4.2fx)", t, t / native);
      }
      printf("\n");
    }
    // A CPU store to the private block between rounds, as a pool reset makes.
    priv[0] = 0;
    priv[1] = 0;
  }
  CK(cudaStreamSynchronize(s));
  printf("\nchecks: out[0] = %g (a softmax value in (0, 1) means no launch took the abort path)\n",
         [&] { float v; CK(cudaMemcpy(&v, out, 4, cudaMemcpyDeviceToHost)); return v; }());
  return 0;
}
