// Device-side printf and assert: printf lowers to vprintf with a packed argument buffer (ints,
// doubles, 64-bit integers, strings, chars), assert to __assertfail. The file name is written out
// so the PTX does not carry the path of the machine that compiled it (clang flavour; nvcc's
// flavour uses its own assert, which names the file as nvcc saw it).
#ifdef __NVCC__
#include <cassert>
#include <cstdio>
#define device_assert(e) assert(e)
#else
extern "C" __device__ int printf(const char *format, ...);
extern "C" __device__ void __assertfail(const char *message, const char *file, unsigned line,
                                        const char *function, unsigned long char_size);
#define device_assert(e) \
    ((e) ? (void)0 : __assertfail(#e, "device_io.cu", __LINE__, __PRETTY_FUNCTION__, 1))
#endif

// One line per thread with every argument kind.
extern "C" __global__ void print_values(int n, float scale) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        printf("t=%d/%d f=%.3f s=%s c=%c ll=%lld u=%u x=%#x\n", t, n, t * scale, "dev",
               'A' + t % 26, (long long)t << 33, (unsigned)t * 3u, 255u);
    }
}

// `count` lines from one thread, in order: fills a small printf FIFO.
extern "C" __global__ void print_many(int count) {
    for (int i = 0; i < count; i++) {
        printf("line %d of %d\n", i, count);
    }
}

// Asserts that every value is positive.
extern "C" __global__ void assert_positive(const int *values, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        device_assert(values[t] > 0);
    }
}
