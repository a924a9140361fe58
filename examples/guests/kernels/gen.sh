#!/bin/sh
# Regenerates the .ptx beside each .cu here with clang (no CUDA toolkit needed).
set -eu
cd "$(dirname "$0")"
for cu in *.cu; do
  clang -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O3 \
    -Xclang -target-feature -Xclang +ptx70 -include "${CUDAMINI:-../../../../shared/cuda/cudamini.h}" \
    -S -o "${cu%.cu}.ptx" "$cu"
done
