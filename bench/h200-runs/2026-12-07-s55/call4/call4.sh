#!/usr/bin/env bash
# Session 55's fourth call (~3 min): where serve's latency spread is. At one connection 12% of
# the respond phases took over 80 µs where their median is near 40 (call 1's /metrics), inside
# the handler. This build times each gpuhost:cuda call into a histogram
# (gpuhost_host_call_duration_seconds), so the spread of each call is read beside respond's.
# 1. serve-ab.sh A (HEAD) vs B (HEAD + spin50.patch: the server's await spin 50 µs instead of 10),
#    sandboxed, 1 and 16 connections: if the spread is the wait's park and wake-up, B narrows it.
# 2. bench-serve.sh (BENCH_SECS=3) at HEAD, with the new spread table.
# Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh; then gpuhost-B built from HEAD + spin50.patch,
# `strip --strip-debug` both, and gpuhost, gpuhost-B and oha in one .gpu/bin.tar.xz; .gpu/sandbox
# and .gpu/lib left out. Device tool run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
ROUNDS=3 SECS=3 CS="1 16" FNS="sandboxed" timeout 100 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/bin/gpuhost-B > $OUT/logs/serve-ab-spin.md 2>&1; echo "serve-ab spin rc=$?" >> $OUT/logs/serve-ab-spin.md
BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
gpu_call_end
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-ab-spin.md | head -60
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | grep -B2 -A30 "^Medians of"
