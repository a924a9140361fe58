#!/usr/bin/env bash
# NOT RUN in session 55 (237 s of device budget left, too little to start a machine) nor in
# session 56 (no start succeeded); session 56's call1 runs this serve bench too, with its builds.
# Session 55's seventh call (~1 min): the serve bench at 91c1215 or later, whose /metrics times
# the guest run's CPU until its response (gpuhost_request_respond_cpu_seconds, one request in
# 16): is respond's spread at one connection CPU time (as call 5's elimination says) or waiting?
# Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh (gpuhost, oha, guests); device tool run, carry
# [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
BENCH_SECS=2 timeout 70 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
gpu_call_end
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | grep -B2 -A40 "^Medians of" | grep -v '^{' | cut -c1-400
