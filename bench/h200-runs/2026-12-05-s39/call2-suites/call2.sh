#!/usr/bin/env bash
# Session 39's second GPU call, at main with the compare past tensor-core loads and the poll
# report moved out of line (s39-rep): every GPU suite (generated programs from seed 9400,
# 200 + 200; the sandbox bench twice inside), then sandbox_bench --ablate on the kernels whose
# versioned loops the slow copy's report disturbed, and the tensor-core ones.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=9400 SANDBOX_GEN_CASES=200 OUT=/tmp/gpu-out \
  timeout 460 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
export SANDBOX_BENCH_KERNELS=reduce_f64_dynamic,softmax_rows,mma_gemm_wmma_tf32,mma_gemm_wmma_s8,mma_gemm_f16_smem
timeout 80 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate.md" 2>&1; echo "rc=$?" >> "$OUT/ablate.md"
tail -24 "$OUT/gpu-tests.txt"
grep -v "in drop failed" "$OUT/ablate.md" | grep -A8 "graph µs: native"
