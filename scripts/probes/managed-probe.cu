// Where a control block in managed memory can live so a foreign primary-context reset cannot
// pull it from under the host (issue #9). stop-probe.cu showed a plain CPU store to managed
// memory stops a polling kernel in ~0.1 ms with no driver call, where copies hang behind other
// threads' driver calls. But managed memory of the primary context dies with it, and the host
// would then touch freed memory. This probe asks:
//   1. can kernels of the primary context use managed memory allocated in a private context?
//   2. does that memory survive cuDevicePrimaryCtxReset, for the CPU and for later kernels?
//   3. what does a CPU access to the primary's managed memory after a reset do (checked with a
//      pipe write, which reports EFAULT instead of faulting)?
// Build: nvcc -O3 -o /tmp/managed-probe managed-probe.cu -lcuda
#include <cuda.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char* s_ = 0; \
  cuGetErrorName(e_, &s_); printf("FAIL line %d %s: %s\n", __LINE__, #x, s_); exit(1); } } while (0)

static const char* PTX =
  ".version 7.8\n.target sm_90\n.address_size 64\n"
  ".visible .entry copy(.param .u64 src, .param .u64 dst){ .reg .u64 %a<3>; .reg .u32 %v;\n"
  "  ld.param.u64 %a1, [src]; ld.param.u64 %a2, [dst]; ld.volatile.global.u32 %v, [%a1];\n"
  "  st.global.u32 [%a2], %v; ret; }\n"
  ".visible .entry spin(.param .u64 flag, .param .u64 dst){ .reg .u64 %a<3>; .reg .u64 %t<3>;\n"
  "  .reg .u32 %v; .reg .pred %p;\n"
  "  ld.param.u64 %a1, [flag]; ld.param.u64 %a2, [dst]; mov.u64 %t1, %globaltimer;\n"
  "L: ld.volatile.global.u32 %v, [%a1]; setp.ne.u32 %p, %v, 0; @%p bra Done;\n"
  "  mov.u64 %t2, %globaltimer; sub.u64 %t2, %t2, %t1; setp.lt.u64 %p, %t2, 3000000000; @%p bra L;\n"
  "  st.global.u32 [%a2], 2; ret;\n"
  "Done: st.global.u32 [%a2], 1; ret; }\n";

static double now_ms() {
  timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// A CPU write that reports a fault as EFAULT: the kernel copies from the pipe into `p`.
static int safe_store(unsigned* p, unsigned v) {
  int fd[2]; if (pipe(fd)) return -1;
  int r = 0;
  if (write(fd[1], &v, 4) != 4) r = -2;
  else if (read(fd[0], p, 4) != 4) r = errno;
  close(fd[0]); close(fd[1]);
  return r;
}

struct Prim { CUcontext ctx; CUmodule mod; CUfunction copy, spin; CUdeviceptr out; };

static Prim primary(CUdevice dev) {
  Prim p;
  CD(cuDevicePrimaryCtxRetain(&p.ctx, dev)); CD(cuCtxSetCurrent(p.ctx));
  CD(cuModuleLoadData(&p.mod, PTX));
  CD(cuModuleGetFunction(&p.copy, p.mod, "copy")); CD(cuModuleGetFunction(&p.spin, p.mod, "spin"));
  CD(cuMemAlloc(&p.out, 64));
  return p;
}

static unsigned read_through_kernel(Prim& p, unsigned* src) {
  CUdeviceptr s = (CUdeviceptr)src; void* args[] = {&s, &p.out};
  CUresult r = cuLaunchKernel(p.copy, 1, 1, 1, 1, 1, 1, 0, 0, args, 0);
  if (r != CUDA_SUCCESS) { const char* n; cuGetErrorName(r, &n); printf("  launch: %s\n", n); return 0xdead; }
  r = cuCtxSynchronize();
  if (r != CUDA_SUCCESS) { const char* n; cuGetErrorName(r, &n); printf("  sync: %s\n", n); return 0xdead; }
  unsigned v; CD(cuMemcpyDtoH(&v, p.out, 4)); return v;
}

static void stop_spin(Prim& p, unsigned* flag) {
  *(volatile unsigned*)flag = 0;
  CUdeviceptr f = (CUdeviceptr)flag; void* args[] = {&f, &p.out};
  CUstream s; CD(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  double t0 = now_ms();
  CD(cuLaunchKernel(p.spin, 132, 1, 1, 256, 1, 1, 0, s, args, 0));
  usleep(50000);
  double ts = now_ms();
  __atomic_store_n(flag, 1u, __ATOMIC_SEQ_CST);
  CD(cuStreamSynchronize(s));
  unsigned v; CD(cuMemcpyDtoH(&v, p.out, 4));
  printf("  spin ended by %s, %.3f ms after the store (ran %.1f ms)\n",
         v == 1 ? "the CPU store" : "its deadline", now_ms() - ts, now_ms() - t0);
  CD(cuStreamDestroy(s));
}

int main() {
  CD(cuInit(0)); CUdevice dev; CD(cuDeviceGet(&dev, 0));
  // A private context that only holds the managed allocation.
  CUcontext mine; CUctxCreateParams cp = {}; CD(cuCtxCreate(&mine, &cp, 0, dev));
  CUdeviceptr m; CD(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
  unsigned* pm = (unsigned*)m; pm[0] = 0x1234;
  CD(cuCtxPopCurrent(0));

  Prim p = primary(dev);
  printf("1. a primary-context kernel reads the private context's managed word: %#x (want 0x1234)\n",
         read_through_kernel(p, pm));
  printf("   and a CPU store stops a primary kernel polling it:\n");
  stop_spin(p, pm);

  CUdeviceptr pmm; CD(cuMemAllocManaged(&pmm, 4096, CU_MEM_ATTACH_GLOBAL));
  unsigned* prim_managed = (unsigned*)pmm; prim_managed[0] = 7;
  printf("   primary's own managed word, CPU store via pipe before reset: rc=%d\n", safe_store(prim_managed, 8));

  CD(cuDevicePrimaryCtxReset(dev));
  printf("2. after cuDevicePrimaryCtxReset:\n");
  printf("   CPU store to the private context's managed word via pipe: rc=%d\n", safe_store(pm, 0x5678));
  printf("   plain CPU read of it: %#x\n", *(volatile unsigned*)pm);
  p = primary(dev);
  printf("   a new primary context's kernel reads it: %#x (want 0x5678)\n", read_through_kernel(p, pm));
  stop_spin(p, pm);
  printf("3. CPU store via pipe to the reset primary's managed word: rc=%d (%s)\n",
         safe_store(prim_managed, 9), strerror(safe_store(prim_managed, 9)));
  CD(cuCtxSetCurrent(mine));
  double t = now_ms();
  for (int i = 0; i < 1000; ++i) safe_store(pm, i);
  printf("   a pipe store costs %.2f us\n", (now_ms() - t));
  printf("managed probe done\n");
  return 0;
}
