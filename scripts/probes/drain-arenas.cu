// Does a sandboxed `gpuhost serve` request's GPU side cost more than a trusted one's (issue #11:
// on the H200 a sandboxed request's drain took 5-12 us longer at every drain,
// bench/h200-runs/2026-12-03-s21/cd72a90/serve-ab-sync2.md)? drain-probe.cu ruled out a DMA from
// cuMemMap memory and the fault word's CPU load, each timed alone. Here the whole device side
// of one request is timed, launch to download seen done (a small kernel writing 32 words, then
// a 4-byte device-to-host copy into pinned memory and an event spun on), in the shapes a
// request has, one thing added at a time:
//   plain     - a cuMemAlloc buffer (a trusted guest's);
//   arena x1  - the buffer at the start of one cuMemCreate/cuMemMap arena, every time;
//   arena x32 - a different arena each request, in turn, as serve's pool hands them out (the
//               GPU's TLB sees a new range per request);
//   +epoch    - and the kernel reads its control block's epoch word at entry, as sandboxed
//               kernels do (managed memory preferred on the device, a different block each
//               request);
//   +reset    - and, just before, the previous request's arena is zeroed (2 MiB cuMemsetD8Async)
//               on another stream with an event recorded, as the pool's resetter does.
// Medians and 90th percentiles of 3000 requests after 200 of warm-up, two rounds.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/drain-arenas scripts/probes/drain-arenas.cu -lcuda && /tmp/drain-arenas
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

__global__ void stamp_epoch(unsigned* out, unsigned n, const volatile unsigned* ctl,
                            unsigned epoch) {
  if (*ctl != epoch) return;
  unsigned i = threadIdx.x;
  if (i < n) out[i] = 0xa000 + i;
}

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

const int WARM = 200, N = 3000, ARENAS = 32;

enum Shape { PLAIN, ARENA1, ARENA32, EPOCH, RESET, SHAPES };
static const char* NAMES[SHAPES] = {"plain", "arena x1", "arena x32", "arena x32 +epoch",
                                    "arena x32 +epoch +reset"};

struct Dev {
  CUstream s, reset_s;
  CUevent e, reset_e;
  void* land;
  CUdeviceptr plain;
  CUdeviceptr arena[ARENAS];
  size_t gran;
  CUdeviceptr ctl;  // ARENAS slots, one 4 KiB page each
};

// One request of `shape`, number `i`: its device time, launch to download seen done.
static double request_us(Dev& d, Shape shape, int i) {
  int k = shape == ARENA1 ? 0 : i % ARENAS;
  CUdeviceptr buf = shape == PLAIN ? d.plain : d.arena[k];
  if (shape == RESET) {
    CUdeviceptr prev = d.arena[(k + ARENAS - 1) % ARENAS];
    CK(cuMemsetD8Async(prev, 0, d.gran, d.reset_s));
    CK(cuEventRecord(d.reset_e, d.reset_s));
  }
  double t0 = now_us();
  if (shape >= EPOCH)
    stamp_epoch<<<1, 32, 0, (cudaStream_t)d.s>>>((unsigned*)buf, 32,
                                                  (const unsigned*)(d.ctl + 4096 * k), 0);
  else
    stamp<<<1, 32, 0, (cudaStream_t)d.s>>>((unsigned*)buf, 32);
  CK(cuMemcpyDtoHAsync(d.land, buf, 4, d.s));
  CK(cuEventRecord(d.e, d.s));
  while (cuEventQuery(d.e) == CUDA_ERROR_NOT_READY) {
  }
  double t1 = now_us();
  if (*(volatile unsigned*)d.land != 0xa000) {
    fprintf(stderr, "shape %s: read %x, not a000\n", NAMES[shape], *(unsigned*)d.land);
    exit(1);
  }
  *(volatile unsigned*)d.land = 0;
  if (shape == RESET) CK(cuEventSynchronize(d.reset_e));
  return t1 - t0;
}

int main() {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  Dev d;
  CK(cuStreamCreate(&d.s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&d.reset_s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&d.e, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&d.reset_e, CU_EVENT_DISABLE_TIMING));
  CK(cuMemAllocHost(&d.land, 4096));
  CK(cuMemAlloc(&d.plain, 1 << 16));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CK(cuMemGetAllocationGranularity(&d.gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int k = 0; k < ARENAS; k++) {
    // As an arena: a reserved range (here 32 granules), its first granule mapped.
    CK(cuMemAddressReserve(&d.arena[k], 32 * d.gran, d.gran, 0, 0));
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, d.gran, &prop, 0));
    CK(cuMemMap(d.arena[k], d.gran, 0, h, 0));
    CK(cuMemSetAccess(d.arena[k], d.gran, &acc, 1));
    CK(cuMemsetD8(d.arena[k], 0, d.gran));
  }
  // Control blocks' host windows: managed, preferred on the device, zeroed by the CPU first.
  CK(cuMemAllocManaged(&d.ctl, 4096 * ARENAS, CU_MEM_ATTACH_GLOBAL));
  memset((void*)d.ctl, 0, 4096 * ARENAS);
  CUmemLocation dev_loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
#if CUDA_VERSION >= 13000
  CK(cuMemAdvise(d.ctl, 4096 * ARENAS, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev_loc));
#else
  CK(cuMemAdvise_v2(d.ctl, 4096 * ARENAS, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev_loc));
#endif

  printf("%-26s %12s %12s   (us, launch to download seen done)\n", "shape", "median", "p90");
  for (int round = 0; round < 2; round++) {
    printf("round %d\n", round + 1);
    for (int sh = 0; sh < SHAPES; sh++) {
      std::vector<double> t;
      for (int i = 0; i < WARM + N; i++) {
        double us = request_us(d, (Shape)sh, i);
        if (i >= WARM) t.push_back(us);
      }
      std::sort(t.begin(), t.end());
      printf("  %-26s %10.2f %12.2f\n", NAMES[sh], t[t.size() / 2], t[t.size() * 9 / 10]);
    }
  }
  printf("drain-arenas done\n");
  return 0;
}
