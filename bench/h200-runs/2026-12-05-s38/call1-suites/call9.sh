#!/usr/bin/env bash
# The next GPU call (written in session 37, when the device time ran out): every GPU suite at
# main, then the sandbox's cost on the slowest kernels taken apart.
# 1. scripts/gpu.sh tests: the suites (conformance's mbarrier_words with session 37's
#    over-arrival test among them, on NVIDIA for the first time), sandbox-probe, the SASS
#    canary, sandbox_bench twice; 200 + 200 generated programs from seed 9000.
# 2. sandbox_bench --ablate on the five slowest kernels of session 37's call 1, twice, with
#    its mended "no shared fences" column (the first edit faulted: ../2026-12-05-s37/
#    call2-mbarrier) and "from file": nvcc's mma_gemm_f16_smem (1.22x native, graph-replayed,
#    on the H100) with its loop's four invariant shared checks hoisted by hand
#    (hoist-smem.py, from the pack's own sandboxed module). If "from file" is well under
#    "sandboxed", the sandbox should hoist such checks itself.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call9.sh"  carry=[".gpu"]
# gpu.sh writes under /tmp so that $OUT keeps at most the 8 files the device tool returns.
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=9000 SANDBOX_GEN_CASES=200 OUT=/tmp/gpu-out \
  timeout 420 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
python3 bench/h200-runs/next/hoist-smem.py .gpu/sandbox/nvcc__mma_gemm.ptx /tmp/hoisted.ptx
export SANDBOX_BENCH_FILE=mma_gemm_f16_smem=/tmp/hoisted.ptx
export SANDBOX_BENCH_KERNELS=mma_gemm_f16_smem,mma_gemm_wmma_s8,reduce_f64_dynamic,softmax_rows,transpose
for i in 1 2; do
  timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/ablate-$i.md"
done
tail -30 "$OUT/gpu-tests.txt"
for i in 1 2; do grep -v "in drop failed" "$OUT/ablate-$i.md" | grep -A8 "graph µs: native"; tail -1 "$OUT/ablate-$i.md"; done
