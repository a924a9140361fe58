#!/usr/bin/env bash
# softcudart on the GPU host: builds the runtime-API programs with the machine's nvcc
# (-cudart shared) and runs each against NVIDIA's own libcudart and against softcudart
# (.gpu/lib/libsoftcudart.so, as libcudart.so.13), both on NVIDIA's driver. NVIDIA's runtime is
# the reference: every program should print its "ok" line with rc=0 under both. A program that
# crashes prints "line N: crashed (signal S)" (the last check it began: expect.h) and rc=128+S;
# one that hangs is stopped after 120 s (rc=124).
# Usage (device tool, carry [".gpu"]): bash scripts/probes/softcudart-h200.sh
set -u
rt=/tmp/rt; mkdir -p $rt; ln -sf "$PWD/.gpu/lib/libsoftcudart.so" $rt/libcudart.so.13
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); cuda=$(dirname "$(readlink -f "$nvcc")")/..
"$nvcc" --version | tail -1
g='-gencode=arch=compute_90,code=[sm_90,compute_90]'
"$nvcc" -cudart shared $g -o $rt/scale_add crates/softcuda/tests/runtime/scale_add.cu
"$nvcc" -cudart shared $g -o $rt/runtime_semantics crates/softcuda/tests/runtime/runtime_semantics.cu
"$nvcc" -cudart shared $g -o $rt/runtime_features crates/softcuda/tests/runtime/runtime_features.cu
"$nvcc" -cudart shared $g --default-stream per-thread -o $rt/runtime_per_thread crates/softcuda/tests/runtime/runtime_per_thread.cu
"$nvcc" -cudart shared $g -o $rt/runtime_managed crates/softcuda/tests/runtime/runtime_managed.cu
"$nvcc" -cudart shared -o $rt/cudart_memory crates/softcuda/tests/c/cudart_memory.c
LD_LIBRARY_PATH=$rt ldd $rt/scale_add | grep -E 'cudart|libcuda'
for p in scale_add runtime_semantics runtime_features runtime_per_thread runtime_managed cudart_memory; do
  echo "== $p, NVIDIA runtime"; LD_LIBRARY_PATH=$cuda/lib64 timeout -k 5 120 $rt/$p; echo "rc=$?"
  echo "== $p, softcudart";     LD_LIBRARY_PATH=$rt timeout -k 5 120 $rt/$p;         echo "rc=$?"
done
