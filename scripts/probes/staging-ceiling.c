/* The best pageable transfer this machine allows (issue #12: is "pageable ≥ 0.7× raw pinned"
 * reachable here?). A plain C pipeline, no gpuhost: 64 MiB of pre-touched pageable memory moved
 * through a ring of page-locked chunks, T threads (a persistent spinning pool, the caller one of
 * them) copying each chunk on the host while the DMA of the chunk before runs, one event per
 * chunk. Uploads copy then DMA; downloads DMA then copy. Printed beside the raw pinned and raw
 * pageable cuMemcpy of the same 64 MiB, medians of 9 after 2 warm-ups, for every chunk size,
 * ring depth and thread count below, best first.
 *
 * STAGING picks the ring's memory: `alloc` (default, cuMemHostAlloc), `register` (page-aligned
 * heap memory, then cuMemHostRegister, as gpuhost's staging is), `huge` / `nohuge` (mmap'd,
 * madvise'd for transparent huge pages or against them, then registered). SHAPES=few measures only
 * 8 MiB chunks, 4 or 8 in flight, 8 or 12 threads (gpuhost's default shape among them).
 *
 * Build and run on the GPU machine (it has nvcc's headers and libcuda):
 *   cc -O2 -pthread -I/usr/local/cuda/include scripts/probes/staging-ceiling.c \
 *      -L/usr/local/nvidia/lib64 -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/sc && /tmp/sc */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "probe-clock.h"

#define SIZE ((size_t)64 << 20)
#define REPS 9
#define WARM 2
#define MAX_THREADS 16
#define MAX_RING 8

#define CK(call)                                                                       \
  do {                                                                                 \
    CUresult r_ = (call);                                                              \
    if (r_ != CUDA_SUCCESS) {                                                          \
      const char *s_ = "?";                                                            \
      cuGetErrorName(r_, &s_);                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_);       \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* The copy pool: workers spin on `gen`, copy their share of the job, count themselves done. */
static struct {
  char *dst;
  const char *src;
  size_t len;
  int parts;
  _Atomic unsigned gen;
  _Atomic int done;
  _Atomic int quit;
} job;

static void copy_share(int i) {
  size_t per = (job.len / job.parts + 63) & ~(size_t)63;
  size_t at = per * i;
  if (at < job.len) memcpy(job.dst + at, job.src + at, at + per > job.len ? job.len - at : per);
}

static void *worker(void *arg) {
  int i = (int)(long)arg;
  unsigned seen = 0;
  for (;;) {
    unsigned g;
    while ((g = atomic_load_explicit(&job.gen, memory_order_acquire)) == seen) {
      if (atomic_load_explicit(&job.quit, memory_order_relaxed)) return NULL;
      __builtin_ia32_pause();
    }
    seen = g;
    if (i < job.parts) copy_share(i);
    atomic_fetch_add_explicit(&job.done, 1, memory_order_release);
  }
}

static int pool_size;
static void pool_copy(char *dst, const char *src, size_t len, int threads) {
  job.dst = dst, job.src = src, job.len = len, job.parts = threads;
  atomic_store_explicit(&job.done, 0, memory_order_relaxed);
  atomic_fetch_add_explicit(&job.gen, 1, memory_order_release);
  copy_share(0);
  while (atomic_load_explicit(&job.done, memory_order_acquire) < pool_size) __builtin_ia32_pause();
}

static CUstream stream;
static CUevent ev[MAX_RING];
static char *ring[MAX_RING];
static CUdeviceptr dev;
static char *pageable, *pinned;

/* Seconds the staged transfers spent in pool_copy since median_of last cleared it: the host
 * copy's rate while the DMAs run beside it (gpuhost bench prints the same figure). */
static double copy_sum;

static void timed_copy(char *dst, const char *src, size_t len, int threads) {
  double t0 = now();
  pool_copy(dst, src, len, threads);
  copy_sum += now() - t0;
}

/* One 64 MiB transfer through the ring; returns seconds. */
static double staged(int up, size_t chunk, int depth, int threads) {
  double t0 = now();
  size_t n = 0;
  for (size_t off = 0; off < SIZE; off += chunk, n++) {
    size_t len = SIZE - off < chunk ? SIZE - off : chunk;
    int s = n % depth;
    if (up) {
      if (n >= (size_t)depth) CK(cuEventSynchronize(ev[s]));
      timed_copy(ring[s], pageable + off, len, threads);
      CK(cuMemcpyHtoDAsync(dev + off, ring[s], len, stream));
      CK(cuEventRecord(ev[s], stream));
    } else {
      /* Downloads keep `depth` DMAs ahead of the copy out. */
      if (n == 0)
        for (size_t k = 0, o = 0; k < (size_t)depth && o < SIZE; k++, o += chunk) {
          size_t l = SIZE - o < chunk ? SIZE - o : chunk;
          CK(cuMemcpyDtoHAsync(ring[k], dev + o, l, stream));
          CK(cuEventRecord(ev[k], stream));
        }
      CK(cuEventSynchronize(ev[s]));
      timed_copy(pageable + off, ring[s], len, threads);
      size_t next = off + (size_t)depth * chunk;
      if (next < SIZE) {
        size_t l = SIZE - next < chunk ? SIZE - next : chunk;
        CK(cuMemcpyDtoHAsync(ring[s], dev + next, l, stream));
        CK(cuEventRecord(ev[s], stream));
      }
    }
  }
  CK(cuStreamSynchronize(stream));
  return now() - t0;
}

static double median_of(double (*f)(int, size_t, int, int), int up, size_t c, int d, int t) {
  double v[REPS];
  for (int i = 0; i < WARM; i++) f(up, c, d, t);
  copy_sum = 0;
  for (int i = 0; i < REPS; i++) v[i] = f(up, c, d, t);
  qsort(v, REPS, sizeof v[0], cmp);
  return v[REPS / 2];
}

static double raw(int up, size_t pinned_src, int unused1, int unused2) {
  (void)unused1, (void)unused2;
  char *host = pinned_src ? pinned : pageable;
  double t0 = now();
  if (up) CK(cuMemcpyHtoD(dev, host, SIZE));
  else CK(cuMemcpyDtoH(host, dev, SIZE));
  return now() - t0;
}

struct row { int up; size_t chunk; int depth, threads; double gbs, copy_gbs; };
static int by_speed(const void *a, const void *b) {
  double x = ((const struct row *)a)->gbs, y = ((const struct row *)b)->gbs;
  return (x < y) - (x > y);
}

int main(void) {
  CUdevice d;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, d));
  CK(cuCtxSetCurrent(ctx));
  char name[128];
  CK(cuDeviceGetName(name, sizeof name, d));
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&dev, SIZE));
  CK(cuMemHostAlloc((void **)&pinned, SIZE, 0));
  pageable = malloc(SIZE);
  if (!pageable) return 1;
  memset(pageable, 1, SIZE), memset(pinned, 2, SIZE);
  const char *staging = getenv("STAGING") ? getenv("STAGING") : "alloc";
  const size_t ring_bytes = (size_t)16 << 20;
  for (int i = 0; i < MAX_RING; i++) {
    if (!strcmp(staging, "alloc")) {
      CK(cuMemHostAlloc((void **)&ring[i], ring_bytes, 0));
      memset(ring[i], 3, ring_bytes);
    } else {
      if (!strcmp(staging, "register")) {
        ring[i] = aligned_alloc(4096, ring_bytes);
      } else {
        void *m = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ring[i] = m == MAP_FAILED ? NULL : m;
        if (ring[i] && madvise(ring[i], ring_bytes, strcmp(staging, "huge") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE))
          perror("madvise");
      }
      if (!ring[i]) return 1;
      memset(ring[i], 3, ring_bytes);
      /* Touched before registering, so the pages are faulted in under the madvise. */
      CK(cuMemHostRegister(ring[i], ring_bytes, 0));
    }
    CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
  }
  pool_size = MAX_THREADS - 1; /* the workers; the caller copies part 0 */
  pthread_t tid[MAX_THREADS];
  for (long i = 1; i < MAX_THREADS; i++) pthread_create(&tid[i], NULL, worker, (void *)i);

  double pin_up = SIZE / median_of(raw, 1, 1, 0, 0) / 1e9;
  double pin_dn = SIZE / median_of(raw, 0, 1, 0, 0) / 1e9;
  double pg_up = SIZE / median_of(raw, 1, 0, 0, 0) / 1e9;
  double pg_dn = SIZE / median_of(raw, 0, 0, 0, 0) / 1e9;
  printf("staging ring: %s\n", staging);
  printf("%s, 64 MiB, medians of %d: raw pinned up %.1f / down %.1f GB/s; raw pageable up %.1f / down %.1f GB/s\n",
         name, REPS, pin_up, pin_dn, pg_up, pg_dn);
  /* One copy of 64 MiB by the pool alone (no DMA), the host's ceiling for the staging copies. */
  const int threads[] = {1, 4, 8, 12, 16};
  for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
    double v[REPS];
    for (int i = 0; i < REPS + WARM; i++) {
      double t0 = now();
      pool_copy(pinned, pageable, SIZE, threads[k]);
      if (i >= WARM) v[i - WARM] = now() - t0;
    }
    qsort(v, REPS, sizeof v[0], cmp);
    printf("host copy alone, %2d threads: %.1f GB/s\n", threads[k], SIZE / v[REPS / 2] / 1e9);
  }

  const size_t chunks[] = {(size_t)8 << 20, (size_t)2 << 20, (size_t)4 << 20, (size_t)16 << 20};
  const int depths[] = {4, 8, 2};
  const int tcount[] = {8, 12, 4, 16};
  int few = getenv("SHAPES") && !strcmp(getenv("SHAPES"), "few");
  int nc = few ? 1 : 4, ne = few ? 2 : 3, nt = few ? 2 : 4;
  struct row rows[2 * 4 * 3 * 4];
  int nrows = 0;
  for (int up = 1; up >= 0; up--)
    for (int c = 0; c < nc; c++)
      for (int e = 0; e < ne; e++)
        for (int t = 0; t < nt; t++) {
          double s = median_of(staged, up, chunks[c], depths[e], tcount[t]);
          double copy_gbs = (double)SIZE * REPS / copy_sum / 1e9;
          rows[nrows++] = (struct row){up, chunks[c], depths[e], tcount[t], SIZE / s / 1e9, copy_gbs};
        }
  qsort(rows, nrows, sizeof rows[0], by_speed);
  printf("\n| direction | chunk MiB | in flight | threads | GB/s | / raw pinned | copy GB/s |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (int up = 1; up >= 0; up--)
    for (int i = 0, shown = 0; i < nrows && shown < 8; i++)
      if (rows[i].up == up) {
        printf("| %s | %zu | %d | %d | %.1f | %.3f | %.1f |\n", up ? "up" : "down", rows[i].chunk >> 20,
               rows[i].depth, rows[i].threads, rows[i].gbs, rows[i].gbs / (up ? pin_up : pin_dn),
               rows[i].copy_gbs);
        shown++;
      }
  atomic_store(&job.quit, 1);
  for (int i = 1; i < MAX_THREADS; i++) pthread_join(tid[i], NULL);
  return 0;
}
