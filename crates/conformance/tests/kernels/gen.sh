#!/usr/bin/env bash
# Regenerates the PTX of the conformance tests' own kernels (kept out of corpus/: they are not
# corpus cases, and the sandbox's every-corpus-kernel test must not run a bounded spin or a
# printf). Same clang flags as corpus/gen-clang.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
clang="${CLANG:-clang}"
mini="${CUDAMINI:-/work/shared/cuda/cudamini.h}"
for cu in "$here"/*.cu; do
    "$clang" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O3 \
        -Xclang -target-feature -Xclang +ptx70 -include "$mini" \
        -S -o "${cu%.cu}.ptx" "$cu"
done
