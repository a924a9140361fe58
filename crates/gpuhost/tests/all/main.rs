//! Integration tests of gpuhost on a real driver (softcuda in CI, NVIDIA on the GPU machine).
