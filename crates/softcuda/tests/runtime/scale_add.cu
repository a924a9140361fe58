// A plain CUDA runtime program, as a user writes one: cudaMalloc, cudaMemcpy, a kernel launched
// with <<<>>>, device printf, cudaDeviceSynchronize. nvcc builds it with the runtime linked
// dynamically (-cudart shared), so the binary loads libcudart.so.13 and libcuda.so.1 at run time:
// on the GPU host, NVIDIA's (scripts/gpu-fixtures.sh runs it there); in CI, softcudart's tests
// build it with nvcc's wheels and run it on softcuda through softcudart (gpuhost's own runtime)
// by LD_LIBRARY_PATH. Prints "runtime scale_add ok" and exits 0 on success.
#include <cstdio>
#include <vector>

__global__ void scale_add(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
    if (i == 0) printf("scale_add: %d elements\n", n);
}

#define RT(call)                                                                      \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            std::printf("%s failed: %s\n", #call, cudaGetErrorString(e_));            \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main() {
    const int n = 1000;
    std::vector<float> x(n), y(n, 1.0f);
    for (int i = 0; i < n; i++) x[i] = float(i);
    float *dx = nullptr, *dy = nullptr;
    RT(cudaMalloc(&dx, n * sizeof(float)));
    RT(cudaMalloc(&dy, n * sizeof(float)));
    RT(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    scale_add<<<(n + 127) / 128, 128>>>(2.0f, dx, dy, n);
    RT(cudaGetLastError());
    RT(cudaDeviceSynchronize());
    RT(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        if (y[i] != 2.0f * i + 1.0f) {
            std::printf("y[%d] = %f, want %f\n", i, y[i], 2.0f * i + 1.0f);
            return 1;
        }
    }
    RT(cudaFree(dx));
    RT(cudaFree(dy));
    std::printf("runtime scale_add ok\n");
    return 0;
}
