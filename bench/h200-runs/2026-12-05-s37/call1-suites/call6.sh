#!/usr/bin/env bash
# The next GPU call (written in session 36, when the device time ran out): main through every
# GPU suite on the H200 (scripts/gpu.sh tests: suites, sandbox-probe, the SASS canary, and
# sandbox_bench twice), with 200 legal and 200 hostile generated programs from seed 8000 and
# 200 + 200 in their ldmatrix variant: seed 8100 there is the program NVIDIA's JIT compiles
# wrong as written, which the legal test now checks against ptxvm's bytes (conformance
# tests/all/reference.rs); it should pass and print "the driver compiles the program as written
# wrong". Session 36's H100 figures of the sandbox bench (27 kernels, the tensor-core ones among
# them) get their H200 run here. Then the
# nvcc flavour of the corpus, regenerated: corpus/nvcc/mma_gemm.ptx predates session 36's four
# wmma kernels (bf16, s8, tf32, f64), which until then run in clang's flavour only; commit it
# from nvcc-corpus.tar.gz (and re-bless ptxvm's sandbox golden). New in the suites since the
# H100 run: conformance's mbarrier_words (does NVIDIA survive mbarrier operations on shared
# words that hold no barrier? the sandbox's question before it can allow mbarrier) and the
# wmma_* cases of every type.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call6.sh"  carry=[".gpu"]
# gpu.sh deletes every log but its own archive; it writes under /tmp so that $OUT keeps at most
# the 8 files the device tool returns. Move this script into the session's run folder once run.
set -u
cd "$(dirname "$0")/../../.."
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=8000 SANDBOX_GEN_CASES=200 OUT=/tmp/gpu-out \
  timeout 420 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
tail -40 "$OUT/gpu-tests.txt"
mkdir -p /tmp/nvcc-corpus && timeout 120 bash scripts/gen-corpus-nvcc.sh /tmp/nvcc-corpus > "$OUT/nvcc-corpus.txt" 2>&1
tar -C /tmp -czf "$OUT/nvcc-corpus.tar.gz" nvcc-corpus
tail -3 "$OUT/nvcc-corpus.txt"
