#!/usr/bin/env bash
# Regenerates corpus/clang/<name>.ptx from every corpus/<name>.cu with clang (no CUDA toolkit),
# using /work/shared/cuda/cudamini.h (override with CUDAMINI=path). Run from anywhere.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
clang="${CLANG:-clang}"
mini="${CUDAMINI:-$here/../../shared/cuda/cudamini.h}"
[ -f "$mini" ] || mini=/work/shared/cuda/cudamini.h
mkdir -p "$here/clang"
for cu in "$here"/*.cu; do
    name="$(basename "$cu" .cu)"
    "$clang" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O3 \
        -Xclang -target-feature -Xclang +ptx70 -include "$mini" -I "$here" \
        -S -o "$here/clang/$name.ptx" "$cu"
    echo "clang: $name.ptx"
done
