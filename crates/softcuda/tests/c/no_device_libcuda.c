/* A stand-in for NVIDIA's libcuda on a machine whose driver is installed but has no usable GPU:
 * cuInit fails with CUDA_ERROR_NO_DEVICE (100). The loader test builds it as libcuda.so and checks
 * that GPUHOST_DRIVER=auto then falls back to softcuda instead of failing. */
int cuInit(unsigned flags) { (void)flags; return 100; }
int cuDeviceGetCount(int *count) { *count = 0; return 0; }
