/* Timing helpers shared by the C probes here (memcpy-probe.c, staging-ceiling.c): a monotonic
 * clock in seconds, and a comparison for qsort to take medians with. Included by a relative
 * path, so each probe still builds with one `cc` command from anywhere. */
#ifndef GPUHOST_PROBE_CLOCK_H
#define GPUHOST_PROBE_CLOCK_H

#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
