#!/usr/bin/env bash
# Regenerates the PTX of the test/bench bundles from stamp.cu with clang (no CUDA toolkit needed).
# Run from this folder: ./gen.sh
set -euo pipefail
cd "$(dirname "$0")"
gen() { # tag dir
  clang -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O3 \
    -Xclang -target-feature -Xclang +ptx70 -include /work/shared/cuda/cudamini.h \
    -DTAG="$1" -S -o "$2/stamp.ptx" stamp.cu
}
gen 0xA0000000u stamp-a
gen 0xB0000000u stamp-b
