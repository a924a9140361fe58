#!/usr/bin/env bash
# Session 38's second GPU call: ptxvm's reconvergence fix (78c5c30) against NVIDIA, and the
# sandbox's cost taken apart on the kernels call 1 left worst.
# 1. conformance's `reconvergence` test and its generated programs from seed 9000 (200 + 200:
#    seed 9074's ptxvm reference differed from the H100 before the fix).
# 2. sandbox_bench --ablate twice on mma_gemm_wmma_tf32 (1.33x graph-replayed in call 1),
#    mma_gemm_wmma and _bf16 (0.83x: faster sandboxed), histogram and layer_norm.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
SKIP_PROBE=1 SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=9000 SANDBOX_GEN_CASES=200 \
  OUT=/tmp/gpu-out timeout 300 bash scripts/gpu.sh tests reconvergence generated \
  > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
export SANDBOX_BENCH_KERNELS=mma_gemm_wmma_tf32,mma_gemm_wmma,mma_gemm_wmma_bf16,histogram,layer_norm
for i in 1 2; do
  timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/ablate-$i.md"
done
grep -E "test result|passed|FAILED|rc=" "$OUT/gpu-tests.txt" | tail -12
for i in 1 2; do grep -v "in drop failed" "$OUT/ablate-$i.md" | grep -A8 "graph µs: native"; tail -1 "$OUT/ablate-$i.md"; done
