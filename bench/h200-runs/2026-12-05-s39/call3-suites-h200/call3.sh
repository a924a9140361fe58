#!/usr/bin/env bash
# Session 39's third GPU call, at main with the helper's stop blocks and the compare before
# loops (s39-rep) merged: every GPU suite (generated programs from seed 9600, 200 + 200; the
# sandbox bench twice inside), then sandbox_bench --ablate with the corrected "no global
# fences" column on the kernels the change aims at and the tensor-core ones.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=9600 SANDBOX_GEN_CASES=200 OUT=/tmp/gpu-out \
  timeout 460 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
export SANDBOX_BENCH_KERNELS=softmax_rows,reduce_f64_dynamic,saxpy,layer_norm,mma_gemm_wmma_tf32,mma_gemm_wmma_s8,mma_gemm_wmma_f64
timeout 100 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate.md" 2>&1; echo "rc=$?" >> "$OUT/ablate.md"
tail -24 "$OUT/gpu-tests.txt"
tar -xzf "$OUT/logs.tar.gz" -C /tmp ./sandbox-1.md ./sandbox-2.md 2>/dev/null && tail -3 /tmp/sandbox-1.md /tmp/sandbox-2.md
grep -v "in drop failed" "$OUT/ablate.md" | grep -A10 "graph µs: native"
