#!/usr/bin/env bash
# Regenerates the nvcc flavour of the kernel corpus: every corpus/<name>.cu → $1/<name>.ptx with
# nvcc -arch=sm_90 -ptx (run on the machine that has the CUDA toolkit, e.g. the H200 host).
# Usage: scripts/gen-corpus-nvcc.sh OUT_DIR     (the committed location is corpus/nvcc)
# NVCC=path overrides the compiler. Prints nvcc's version first so the log says which made them.
set -euo pipefail
out="${1:?usage: $0 OUT_DIR}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nvcc="${NVCC:-nvcc}"
command -v "$nvcc" >/dev/null 2>&1 || nvcc=/usr/local/cuda/bin/nvcc
"$nvcc" --version | tail -n 2
mkdir -p "$out"
for cu in "$here"/corpus/*.cu; do
    name="$(basename "$cu" .cu)"
    "$nvcc" -arch=sm_90 -ptx -O3 -I "$here/corpus" -o "$out/$name.ptx" "$cu"
    echo "nvcc: $name.ptx"
done
