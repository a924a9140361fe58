#!/usr/bin/env bash
# Session 48's third call (~3 min), at the session's last code (the serve red team's fixes and
# the control listener left out of the per-client cap merged): gpuhost-cli's suite at one test
# thread and at 16, then three more times at 16 (the cut-short test now starts at rest).
#   PACK_SUITES="gpuhost-cli" bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s48/call3/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
timeout 150 bash .gpu/run.sh "${GPU_TEST_SKIPS[@]}" > "$OUT/logs/tests.log" 2>&1; echo "one thread rc=$?" >> "$OUT/logs/tests.log"
for i in 1 2 3 4; do
  timeout 60 bash .gpu/run-parallel.sh "${GPU_TEST_SKIPS[@]}" > "$OUT/logs/tests-parallel-$i.log" 2>&1
  echo "16 threads, run $i rc=$?" >> "$OUT/logs/tests-parallel-$i.log"
done
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/tests.log | grep -E '^test result:|FAILED|rc=' | head -8
for i in 1 2 3 4; do tar -xzOf "$OUT/logs.tar.gz" logs/tests-parallel-$i.log | grep -E '^test result:|FAILED|rc=' | head -4; done
