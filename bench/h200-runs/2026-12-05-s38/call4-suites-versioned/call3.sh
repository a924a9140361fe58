#!/usr/bin/env bash
# Session 38's third GPU call, at main with count-down loop versioning (s38-ver) and the
# reconvergence fix: every GPU suite (conformance's mended `reconvergence` test among them;
# generated programs from seed 9200, 200 + 200), the sandbox bench twice (31 kernels), then
# sandbox_bench --ablate and --without version on the five worst kernels of call 1.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=9200 SANDBOX_GEN_CASES=200 OUT=/tmp/gpu-out \
  timeout 420 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
export SANDBOX_BENCH_KERNELS=mma_gemm_wmma_tf32,mma_gemm_f16_smem,softmax_rows,histogram,transpose
timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate.md" 2>&1; echo "rc=$?" >> "$OUT/ablate.md"
timeout 60 .gpu/bin/sandbox_bench --without version > "$OUT/without-version.md" 2>&1
echo "rc=$?" >> "$OUT/without-version.md"
tail -22 "$OUT/gpu-tests.txt"
grep -v "in drop failed" "$OUT/ablate.md" | grep -A8 "graph µs: native"
grep -E "^\| (kernel|mma|softmax|histogram|transpose)|geometric|graph-replayed" "$OUT/without-version.md"
