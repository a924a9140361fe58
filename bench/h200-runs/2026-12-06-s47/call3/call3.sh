#!/usr/bin/env bash
# Session 47's third call (~3 min), at the session's last code (the serve red team's fixes
# merged): gpuhost-cli's suite (serve's tests among it) at one test thread and at 16.
#   PACK_SUITES="gpuhost-cli" bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s47/call3/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
timeout 200 bash .gpu/run.sh "${GPU_TEST_SKIPS[@]}" > "$OUT/logs/tests.log" 2>&1; echo "one thread rc=$?" >> "$OUT/logs/tests.log"
timeout 150 bash .gpu/run-parallel.sh "${GPU_TEST_SKIPS[@]}" > "$OUT/logs/tests-parallel.log" 2>&1; echo "16 threads rc=$?" >> "$OUT/logs/tests-parallel.log"
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/tests.log logs/tests-parallel.log | grep -E '^== |^test result:|FAILED|panicked|rc=' | head -30
