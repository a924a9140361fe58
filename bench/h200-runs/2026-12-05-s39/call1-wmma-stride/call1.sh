#!/usr/bin/env bash
# Session 39's first GPU call, at the wmma stride change (377f464): the sandbox bench twice
# (31 kernels), then sandbox_bench --ablate on the tensor-core kernels.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
for i in 1 2; do
  timeout 70 .gpu/bin/sandbox_bench --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/sandbox-$i.md"
done
export SANDBOX_BENCH_KERNELS=mma_gemm_wmma_tf32,mma_gemm_wmma,mma_gemm_wmma_s8,mma_gemm_wmma_f64,mma_gemm_f16_smem
timeout 90 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate.md" 2>&1; echo "rc=$?" >> "$OUT/ablate.md"
for i in 1 2; do tail -4 "$OUT/sandbox-$i.md"; grep -E '^\| mma_gemm_wmma' "$OUT/sandbox-$i.md"; done
grep -v "in drop failed" "$OUT/ablate.md" | grep -A8 "graph µs: native"
