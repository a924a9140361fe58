// How the host can stop a runaway sandboxed kernel on NVIDIA, measured (issue #9).
//
// gpuhost's watchdog stopped kernels by copying a new abort epoch into device memory
// (cuMemcpyHtoDAsync on its own non-blocking stream). On the H200 that copy hung: the watchdog
// sat in libcuda's internal rwlock while another thread's driver call held it, and that call
// waited for the device, i.e. for the runaway kernel the copy was meant to stop. This probe
// finds which driver calls do that, and measures the alternatives:
//   copy   - the 4-byte HtoD copy (the old way);
//   wv32   - cuStreamWriteValue32 on a non-blocking stream;
//   managed- the epoch in managed memory, written by a plain CPU store (no driver call).
// Every kernel here stops itself 3 s after it starts (globaltimer), so nothing hangs forever:
// a store that takes ~3 s was blocked until the kernel stopped itself.
//
// Then the cost side: polling managed memory from a big grid, and the round trip of a short
// launch whose fault word the host reads after it (CPU read of managed memory vs a DtoH copy).
//
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o /tmp/stop-probe stop-probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char* s_ = 0; \
  cuGetErrorName(e_, &s_); printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)

static cudaMemLocation dev0() {
  cudaMemLocation l = {}; l.type = cudaMemLocationTypeDevice; l.id = 0; return l;
}

static double now_ms() {
  timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

// Spins until *epoch != 0 (polled every 1024 iterations) or 3 s pass; out[0] = 1 if stopped by
// the epoch, 2 if by its own deadline.
__global__ void endless(volatile unsigned* epoch, unsigned* out) {
  unsigned long long t0 = gtimer();
  unsigned x = threadIdx.x;
  for (unsigned i = 1;; ++i) {
    x = x * 1664525u + 1013904223u;
    if ((i & 1023) == 0) {
      if (*epoch != 0) { if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 1; return; }
      if (gtimer() - t0 > 3000000000ull) { if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 2; return; }
    }
    if (x == 0xffffffffu) out[1] = x;  // keeps the loop
  }
}

// Needs N*4 bytes of local memory per thread: launching a larger one than before grows the
// context's local memory (each case uses a larger one, so each pays the growth).
template <unsigned N>
__global__ void big_local(unsigned* out, unsigned n) {
  volatile unsigned a[N];
  for (unsigned i = 0; i < N; ++i) a[i] = i * n;
  out[2] = a[n % N];
}
static int g_local_step;

__global__ void tiny(volatile unsigned* epoch, unsigned* fault) {
  if (*epoch != 0) return;
  if (threadIdx.x == 1000000) *fault = 1;
}

// A loop polling *epoch every `every` iterations (0: never).
__global__ void poller(volatile unsigned* epoch, unsigned* out, unsigned iters, unsigned every) {
  unsigned x = threadIdx.x + blockIdx.x;
  for (unsigned i = 1; i <= iters; ++i) {
    x = x * 1664525u + 1013904223u;
    if (every && (i % every) == 0 && *epoch != 0) return;
  }
  if (x == 0x12345678u) out[3] = x;
}

struct Blocker { const char* name; int which; };
static CUmodule g_ptx_module;
static volatile int g_blocker_done;
static double g_blocker_ms;
static unsigned* g_out;

static const char* PTX =
  ".version 7.8\n.target sm_90\n.address_size 64\n"
  ".visible .entry k(.param .u64 p){ .reg .u64 %r; ld.param.u64 %r, [p]; st.global.u32 [%r], 7; ret; }\n";

static void* blocker(void* arg) {
  int which = *(int*)arg;
  double t = now_ms();
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  switch (which) {
    case 1:
      switch (g_local_step++) {
        case 0: big_local<16384><<<264, 256, 0, s>>>(g_out, 3); break;
        case 1: big_local<24576><<<264, 256, 0, s>>>(g_out, 3); break;
        default: big_local<32768><<<264, 256, 0, s>>>(g_out, 3); break;
      }
      CK(cudaGetLastError()); break;
    case 2: { void* p; CK(cudaMalloc(&p, 1 << 30)); CK(cudaFree(p)); break; }
    case 3: { void* p; CK(cudaMalloc(&p, 4096)); break; /* then freed below */ }
    case 4: { CUmodule m; CD(cuModuleLoadData(&m, PTX)); g_ptx_module = m; break; }
    case 5: { void* p; CK(cudaMallocHost(&p, 1 << 20)); CK(cudaFreeHost(p)); break; }
    case 6: {
      CUmemGenericAllocationHandle h; CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0; size_t g = 2 << 20;
      CD(cuMemCreate(&h, g, &prop, 0)); CUdeviceptr va; CD(cuMemAddressReserve(&va, g, 0, 0, 0));
      CD(cuMemMap(va, g, 0, h, 0)); CUmemAccessDesc d = {}; d.location = prop.location;
      d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; CD(cuMemSetAccess(va, g, &d, 1));
      CD(cuMemUnmap(va, g)); CD(cuMemAddressFree(va, g)); CD(cuMemRelease(h)); break;
    }
    case 7: { void* p; CK(cudaMalloc(&p, 4096)); CK(cudaFree(p)); break; }
    default: break;
  }
  g_blocker_ms = now_ms() - t;
  g_blocker_done = 1;
  return 0;
}

// One stop experiment: an endless kernel, a blocker thread started 50 ms later, the stop 100 ms
// after the launch. Prints how long the stop itself took and how the kernel ended.
static void stop_case(const char* how, const char* bname, int which) {
  unsigned *epoch_dev, *epoch_managed, *pinned;
  CK(cudaMalloc(&epoch_dev, 4)); CK(cudaMemset(epoch_dev, 0, 4));
  CK(cudaMallocManaged(&epoch_managed, 4096)); *(volatile unsigned*)epoch_managed = 0;
  CK(cudaMemAdvise(epoch_managed, 4096, cudaMemAdviseSetPreferredLocation, dev0()));
  CK(cudaMemPrefetchAsync(epoch_managed, 4096, dev0(), 0, 0));
  CK(cudaHostAlloc(&pinned, 4, 0)); *pinned = 1;
  CK(cudaMemset(g_out, 0, 16)); CK(cudaDeviceSynchronize());
  bool managed = strcmp(how, "managed") == 0;
  cudaStream_t run, ctl;
  CK(cudaStreamCreateWithFlags(&run, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&ctl, cudaStreamNonBlocking));
  double t0 = now_ms();
  endless<<<132 * 4, 256, 0, run>>>(managed ? epoch_managed : epoch_dev, g_out);
  CK(cudaGetLastError());
  usleep(50000);
  g_blocker_done = 0;
  pthread_t th; int w = which; pthread_create(&th, 0, blocker, &w);
  usleep(50000);
  double ts = now_ms();
  if (managed) {
    __atomic_store_n(epoch_managed, 1u, __ATOMIC_SEQ_CST);
  } else if (strcmp(how, "copy") == 0) {
    CK(cudaMemcpyAsync(epoch_dev, pinned, 4, cudaMemcpyHostToDevice, ctl));
    CK(cudaStreamSynchronize(ctl));
  } else {
    CD(cuStreamWriteValue32((CUstream)ctl, (CUdeviceptr)epoch_dev, 1, 0));
    CK(cudaStreamSynchronize(ctl));
  }
  double store_ms = now_ms() - ts;
  CK(cudaStreamSynchronize(run));
  double run_ms = now_ms() - t0;
  pthread_join(th, 0);
  unsigned r[2]; CK(cudaMemcpy(r, g_out, 8, cudaMemcpyDeviceToHost));
  printf("stop %-8s blocker %-10s store %8.3f ms  kernel ran %8.1f ms  ended by %s  blocker %8.1f ms\n",
         how, bname, store_ms, run_ms, r[0] == 1 ? "epoch" : r[0] == 2 ? "DEADLINE" : "?", g_blocker_ms);
  CK(cudaDeviceSynchronize());
  CK(cudaStreamDestroy(run)); CK(cudaStreamDestroy(ctl));
  CK(cudaFree(epoch_dev)); CK(cudaFree(epoch_managed)); CK(cudaFreeHost(pinned));
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

// Kernel time of a big polling grid, the epoch in device or managed memory.
static void poll_cost() {
  unsigned *dev, *man, *man_rm;
  CK(cudaMalloc(&dev, 4)); CK(cudaMemset(dev, 0, 4));
  CK(cudaMallocManaged(&man, 4096)); *(volatile unsigned*)man = 0;
  CK(cudaMemAdvise(man, 4096, cudaMemAdviseSetPreferredLocation, dev0()));
  CK(cudaMallocManaged(&man_rm, 4096)); *(volatile unsigned*)man_rm = 0;
  CK(cudaMemAdvise(man_rm, 4096, cudaMemAdviseSetReadMostly, dev0()));
  CK(cudaMemPrefetchAsync(man, 4096, dev0(), 0, 0)); CK(cudaMemPrefetchAsync(man_rm, 4096, dev0(), 0, 0));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  struct { const char* n; unsigned* p; } where[] = {{"device", dev}, {"managed", man}, {"managed-readmostly", man_rm}};
  for (unsigned every : {0u, 4096u, 1024u, 64u}) {
    for (auto& w : where) {
      std::vector<double> ts;
      for (int i = 0; i < 11; ++i) {
        CK(cudaEventRecord(a)); poller<<<132 * 8, 256>>>(w.p, g_out, 20000, every); CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (i) ts.push_back(ms);
      }
      printf("poll every %5u %-20s %8.4f ms\n", every, w.n, median(ts));
    }
  }
  CK(cudaFree(dev)); CK(cudaFree(man)); CK(cudaFree(man_rm));
}

// A short launch, then the host reads its fault word, 2000 times: a DtoH copy from device memory
// (the old way) vs a CPU read of managed memory (epoch and fault word on separate pages).
static void round_trip() {
  unsigned *epoch_dev, *fault_dev, *pinned, *man;
  CK(cudaMalloc(&epoch_dev, 4)); CK(cudaMemset(epoch_dev, 0, 4));
  CK(cudaMalloc(&fault_dev, 4)); CK(cudaMemset(fault_dev, 0, 4));
  CK(cudaHostAlloc(&pinned, 4, 0));
  CK(cudaMallocManaged(&man, 8192)); memset(man, 0, 8192);
  CK(cudaMemAdvise(man, 4096, cudaMemAdviseSetPreferredLocation, dev0()));
  CK(cudaMemAdvise(man + 1024, 4096, cudaMemAdviseSetReadMostly, dev0()));
  cudaStream_t s, c; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> ts;
    for (int i = 0; i < 2000; ++i) {
      double t = now_ms();
      if (mode == 0) {
        tiny<<<1, 32, 0, s>>>(epoch_dev, fault_dev); CK(cudaStreamSynchronize(s));
      } else if (mode == 1) {
        tiny<<<1, 32, 0, s>>>(epoch_dev, fault_dev); CK(cudaStreamSynchronize(s));
        CK(cudaMemcpyAsync(pinned, fault_dev, 4, cudaMemcpyDeviceToHost, c)); CK(cudaStreamSynchronize(c));
      } else {
        tiny<<<1, 32, 0, s>>>(man, man + 1024); CK(cudaStreamSynchronize(s));
        volatile unsigned f = *(volatile unsigned*)(man + 1024); (void)f;
      }
      if (i >= 100) ts.push_back((now_ms() - t) * 1000);
    }
    const char* n[] = {"launch+sync (no fault read)", "launch+sync+DtoH copy of fault", "launch+sync+CPU read of managed fault"};
    printf("round trip %-40s %8.2f us\n", n[mode], median(ts));
  }
}

int main() {
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  int cma = 0; CK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, 0));
  int pma = 0; CK(cudaDeviceGetAttribute(&pma, cudaDevAttrPageableMemoryAccess, 0));
  printf("concurrentManagedAccess %d pageableMemoryAccess %d\n", cma, pma);
  CK(cudaMalloc(&g_out, 64));
  const char* bn[] = {"none", "big_local", "malloc1G", "malloc", "modload", "mallochost", "vmm", "malloc+free"};
  for (int which : {0, 1, 2, 7, 4, 5, 6}) {
    for (const char* how : {"copy", "wv32", "managed"}) stop_case(how, bn[which], which);
  }
  poll_cost();
  round_trip();
  printf("probe done\n");
  return 0;
}
