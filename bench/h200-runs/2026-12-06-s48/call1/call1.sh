#!/usr/bin/env bash
# Session 48's first call (~6 min), at fc25b12 (session 47's last code but comments; its pack,
# PACK_SUITES="gpuhost-cli", had no machine): gpuhost-cli's suite at 16 test threads three times,
# to learn from the cut-short test's new failure message how its connection ended when it fails
# (serve::faults::a_streamed_body_cut_short_by_the_time_limit_is_not_ended_as_if_whole failed 2 of
# 3 such runs in session 47 and never at one thread).
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s48/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin nproc
for i in 1 2 3; do
  timeout 140 bash .gpu/run-parallel.sh "${GPU_TEST_SKIPS[@]}" > "$OUT/logs/tests-parallel-$i.log" 2>&1
  echo "16 threads, run $i rc=$?" >> "$OUT/logs/tests-parallel-$i.log"
done
gpu_call_end
cat "$OUT/machine.txt"
for i in 1 2 3; do
  tar -xzOf "$OUT/logs.tar.gz" logs/tests-parallel-$i.log | grep -E '^test result:|FAILED|panicked|cut short|elapsed|rc=' | head -12
done
