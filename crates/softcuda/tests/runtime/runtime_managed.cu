// `__managed__` variables: one int, an array and an initialised float, declared in device code
// and used from host code directly (nvcc reaches them through a pointer the runtime sets when
// the module loads: `__cudaRegisterManagedVar`, `__cudaInitModule`). The host reads their
// initial values, writes them, kernels update them, and after cudaDeviceSynchronize the host
// reads the kernels' results; a second round checks that host writes made after a kernel are
// what the next kernel reads.
// Built with `nvcc -cudart shared`; run against NVIDIA's runtime and driver it is the reference
// for softcudart. Prints "runtime managed ok" and exits 0 on success; otherwise prints what
// differed and exits 1.
#include <cstdio>

#include "expect.h"

constexpr int kN = 256;

__managed__ int counter;
__managed__ int values[kN];
__managed__ float scale = 2.0f;

// values[i] = values[i] * scale + 1 for each thread's element; counts the threads in counter.
__global__ void scale_and_count() {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < kN) {
        values[i] = int(values[i] * scale) + 1;
        atomicAdd(&counter, 1);
    }
}

int main() {
    // Zero-initialised and initialised variables, read before any kernel or runtime call.
    CHECK(counter == 0);
    CHECK(scale == 2.0f);
    CHECK(values[kN - 1] == 0);

    counter = 10;
    for (int i = 0; i < kN; i++) values[i] = i;
    scale_and_count<<<kN / 64, 64>>>();
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(counter == 10 + kN);
    for (int i = 0; i < kN; i++) {
        if (values[i] != 2 * i + 1) {
            std::printf("values[%d] is %d, want %d\n", i, values[i], 2 * i + 1);
            return 1;
        }
    }

    // Host writes after a kernel are what the next kernel reads.
    scale = 3.0f;
    counter = -kN;
    values[0] = 100;
    scale_and_count<<<kN / 64, 64>>>();
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(counter == 0);
    CHECK(values[0] == 301);
    CHECK(values[kN - 1] == 3 * (2 * (kN - 1) + 1) + 1);

    EXPECT(cudaGetLastError(), cudaSuccess);
    return report("runtime managed");
}
