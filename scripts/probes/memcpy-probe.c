/* Host memory-copy bandwidth of the GPU machine (issue #12: what a guest transfer's CPU copies
 * cost). Copies 64 MiB between two pre-touched buffers with 1, 2, 4, 8 and 12 threads; median of
 * 9 after 2 warm-ups. Build: cc -O2 -pthread memcpy-probe.c -o memcpy-probe */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe-clock.h"

#define SIZE (64u << 20)
struct part { char *dst; const char *src; size_t len; };

static void *copy_part(void *arg) {
  struct part *p = arg;
  memcpy(p->dst, p->src, p->len);
  return NULL;
}

int main(void) {
  char *src = malloc(SIZE), *dst = malloc(SIZE);
  if (!src || !dst) { perror("malloc"); return 1; }
  memset(src, 1, SIZE);
  memset(dst, 2, SIZE);
  int counts[] = {1, 2, 4, 8, 12};
  for (unsigned c = 0; c < sizeof counts / sizeof *counts; c++) {
    int n = counts[c];
    double t[11];
    for (int r = 0; r < 11; r++) {
      pthread_t th[16];
      struct part parts[16];
      double t0 = now();
      for (int i = 0; i < n; i++) {
        parts[i] = (struct part){dst + (size_t)SIZE / n * i, src + (size_t)SIZE / n * i, SIZE / n};
        if (pthread_create(&th[i], NULL, copy_part, &parts[i])) { perror("pthread_create"); return 1; }
      }
      for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
      t[r] = now() - t0;
    }
    qsort(t + 2, 9, sizeof *t, cmp);
    printf("memcpy 64 MiB, %2d threads: %.3f ms, %.1f GB/s\n", n, t[6] * 1e3, SIZE / t[6] / 1e9);
  }
  /* First touch: what a fresh mapping costs (page faults), as a freshly lifted Vec would. */
  double t0 = now();
  char *fresh = malloc(SIZE);
  memcpy(fresh, src, SIZE);
  printf("memcpy 64 MiB into a fresh allocation: %.3f ms\n", (now() - t0) * 1e3);
  free(fresh);
  return 0;
}
