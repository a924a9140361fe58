// What a sandboxed guest's drain pays that a trusted one's does not (issue #11: in `gpuhost
// serve` on the H200 a sandboxed `read-after` of a stream whose kernel had already ended took 39
// µs against 29 trusted, bench/h200-runs/2026-12-03-s21/cd72a90/serve-ab-sync.md). The two
// suspects, each timed alone, medians of 2000 after a warm-up:
//   dma  - a 4-byte device-to-host DMA into pinned memory, then an event query loop: from a
//          cuMemAlloc buffer (a trusted guest's) against one in a cuMemCreate/cuMemMap range (a
//          sandboxed guest's arena), after a small kernel wrote it;
//   load - the CPU load of a control block's fault word: managed memory preferred on the host
//          and accessed by the device, as gpuhost's ControlPool advises its device window, read
//          after a kernel that does not touch it (every launch's case) and after one that does.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/drain-probe scripts/probes/drain-probe.cu -lcuda && /tmp/drain-probe
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    CUresult r_ = (x);                                                              \
    if (r_ != CUDA_SUCCESS) {                                                       \
      const char* s_ = 0;                                                           \
      cuGetErrorString(r_, &s_);                                                    \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");    \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

__global__ void stamp(unsigned* out, unsigned n) {
  unsigned i = threadIdx.x;
  if (i < n) out[i] = 0xa000 + i;
}

__global__ void touch(volatile unsigned* word) { if (threadIdx.x == 0) *word = 0; }

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const int N = 2000;

// Kernel writes `buf`, then a 4-byte DMA of it into pinned `land`: the DMA's time, from its
// enqueue to its event seen done (the kernel's end awaited first, as the drain finds it).
static double dma_us(CUdeviceptr buf, void* land, CUstream s, CUevent e) {
  std::vector<double> t;
  for (int i = 0; i < N + 100; i++) {
    stamp<<<1, 32, 0, (cudaStream_t)s>>>((unsigned*)buf, 32);
    CK(cuStreamSynchronize(s));
    double t0 = now_us();
    CK(cuMemcpyDtoHAsync(land, buf, 4, s));
    CK(cuEventRecord(e, s));
    while (cuEventQuery(e) == CUDA_ERROR_NOT_READY) {
    }
    double t1 = now_us();
    if (i >= 100) t.push_back(t1 - t0);
  }
  return median(t);
}

// The CPU load of `word` after each launch of a kernel (`touching` it or not), the kernel's end
// awaited first.
static double load_us(volatile unsigned* word, bool touching, CUdeviceptr other, CUstream s) {
  std::vector<double> t;
  unsigned sink = 0;
  for (int i = 0; i < N + 100; i++) {
    if (touching)
      touch<<<1, 32, 0, (cudaStream_t)s>>>(word);
    else
      stamp<<<1, 32, 0, (cudaStream_t)s>>>((unsigned*)other, 32);
    CK(cuStreamSynchronize(s));
    double t0 = now_us();
    sink += *word;
    double t1 = now_us();
    if (i >= 100) t.push_back(t1 - t0);
  }
  if (sink == 12345) printf(" ");
  return median(t);
}

int main() {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e;
  CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  void* land;
  CK(cuMemAllocHost(&land, 4096));

  CUdeviceptr plain;
  CK(cuMemAlloc(&plain, 1 << 16));

  // An arena's way: a reserved range, one 2 MiB physical allocation mapped at its start.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, 64 * gran, gran, 0, 0));
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, gran, &prop, 0));
  CK(cuMemMap(va, gran, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, gran, &acc, 1));

  // A control block's device window: managed, preferred on the host, accessed by the device.
  CUdeviceptr m;
  CK(cuMemAllocManaged(&m, 4 << 20, CU_MEM_ATTACH_GLOBAL));
  memset((void*)m, 0, 4 << 20);
  CUdeviceptr win = m + (2 << 20);
  CUmemLocation host_loc = {CU_MEM_LOCATION_TYPE_HOST, 0};
  CUmemLocation dev_loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
#if CUDA_VERSION >= 13000
  CK(cuMemAdvise(win, 2 << 20, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host_loc));
  CK(cuMemAdvise(win, 2 << 20, CU_MEM_ADVISE_SET_ACCESSED_BY, dev_loc));
#else
  CK(cuMemAdvise_v2(win, 2 << 20, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host_loc));
  CK(cuMemAdvise_v2(win, 2 << 20, CU_MEM_ADVISE_SET_ACCESSED_BY, dev_loc));
#endif

  for (int round = 0; round < 2; round++) {
    printf("round %d\n", round + 1);
    printf("  dma  4 B from cuMemAlloc memory:            %7.2f us\n", dma_us(plain, land, s, e));
    printf("  dma  4 B from cuMemCreate/cuMemMap memory:  %7.2f us\n", dma_us(va, land, s, e));
    printf("  load fault word, kernel not touching it:    %7.3f us\n",
           load_us((volatile unsigned*)win, false, plain, s));
    printf("  load fault word, kernel writing it:         %7.3f us\n",
           load_us((volatile unsigned*)win, true, plain, s));
    printf("  load plain pinned host word:                %7.3f us\n",
           load_us((volatile unsigned*)land, false, plain, s));
  }
  printf("drain probe done\n");
  return 0;
}
