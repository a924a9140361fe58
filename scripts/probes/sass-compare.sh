#!/usr/bin/env bash
# Two rewrites of the nvcc corpus side by side in NVIDIA's SASS, without a GPU (issue #9: what a
# change to the sandbox's output costs on the H200 before it runs there): registers, each
# function's instruction count and first loop's address, and hot loop sizes (sass-loops.py),
# ptxas -O3 for sm_90. Dumps from `cargo run --release -p ptxvm --example sandbox_dump -- DIR
# corpus/nvcc` of each build. Needs ptxas (GPUHOST_NVCC_DIR, as .ci/run installs it) and
# cuobjdump with nvdisasm (GPUHOST_SASS_TOOLS_DIR).
#   bash scripts/probes/sass-compare.sh DIR_A DIR_B [KERNEL...]
set -euo pipefail
cd "$(dirname "$0")/../.."
nvcc_dir="${GPUHOST_NVCC_DIR:-$PWD/target/nvcc/nvidia/cu13}"
tools="${GPUHOST_SASS_TOOLS_DIR:-$PWD/target/sass-tools/nvidia/cu13}"
export NVDISASM_PATH="$tools/bin"
a="$1"; b="$2"; shift 2
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(histogram matmul_tiled transpose softmax_rows reduce_f64_dynamic saxpy
  vector_add layer_norm scan_block reduce_shared reduce_warp local_sort mbarrier_pipeline)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '| kernel | registers A | registers B | A: insts, first loop (skip copy) | B | hot loops A | hot loops B |\n|---|---|---|---|---|---|---|\n'
for k in "${kernels[@]}"; do
  cells=()
  for side in a b; do
    dir=${!side}
    "$nvcc_dir/bin/ptxas" -arch=sm_90 -O3 -v "$dir/nvcc__$k.ptx" -o "$tmp/$k.$side.cubin" 2> "$tmp/$k.$side.txt"
    "$tools/bin/cuobjdump" -sass "$tmp/$k.$side.cubin" > "$tmp/$k.$side.sass"
    python3 scripts/probes/sass-loops.py "$tmp/$k.$side.sass" > "$tmp/$k.$side.loops"
  done
  regs() { grep -o 'Used [0-9]* reg' "$tmp/$k.$1.txt" | awk '{print $2}' | paste -sd/; }
  skip() { grep '__gpuhost_skip:' "$tmp/$k.$1.loops" | sed -E 's/.*: ([0-9]+) insts; loops: (0x[0-9a-f]+).*/\1, \2/; s/.*: ([0-9]+) insts; loops: *$/\1, none/'; }
  hot() { grep -o 'hot [0-9]*' "$tmp/$k.$1.loops" | awk '{print $2}' | paste -sd' '; }
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$k" "$(regs a)" "$(regs b)" "$(skip a)" "$(skip b)" "$(hot a)" "$(hot b)"
done
