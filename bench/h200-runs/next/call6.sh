#!/usr/bin/env bash
# The next GPU call (written in session 36, when the device time ran out): main through every
# GPU suite on the H200 (scripts/gpu.sh tests: suites, sandbox-probe, the SASS canary, and
# sandbox_bench twice), with 300 legal and 300 hostile generated programs from seed 8000: seed
# 8100 there is the program NVIDIA's JIT compiles wrong as written, which the legal test now
# checks against ptxvm's bytes (conformance tests/all/reference.rs); it should pass and print
# "the driver compiles the program as written wrong". Session 36's H100 figures of the
# sandbox bench (27 kernels, the tensor-core ones among them) get their H200 run here.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call6.sh"  carry=[".gpu"]
# gpu.sh deletes every log but its own archive; it writes under /tmp so that $OUT keeps at most
# the 8 files the device tool returns. Move this script into the session's run folder once run.
set -u
cd "$(dirname "$0")/../../.."
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=8000 SANDBOX_GEN_CASES=300 OUT=/tmp/gpu-out \
  timeout 480 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
cp /tmp/gpu-out/logs.tar.gz "$OUT/" 2>/dev/null
tail -40 "$OUT/gpu-tests.txt"
