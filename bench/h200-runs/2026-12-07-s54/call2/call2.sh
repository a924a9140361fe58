#!/usr/bin/env bash
# NOT RUN in session 54: from 13:19 to 14:56 UTC eight starts failed (seven more calls were refused) and
# the budget ran out. Rebuild its pack as below and run it on the next lease.
# Session 54's trimmed GPU call (~90 s), for when call1 (beside this folder) no longer fits the
# budget left after failed starts. Same pack as call1. 1: serve-ab.sh A (3f32e86 without 4ef1d04's
# tcache_gc_incr_bytes) vs gpuhost (3f32e86), sandboxed http-stamp, c = 1 and 16, two rounds of
# 3 s. 2: perfstat.sh's per-thread counters, one round (ROUNDS=1).
#   device tool: run  command="bash bench/h200-runs/2026-12-07-s54/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
ROUNDS=2 SECS=3 CS="1 16" FNS="sandboxed" timeout 75 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost-A .gpu/bin/gpuhost > $OUT/logs/serve-ab-tcache.md 2>&1; echo "serve-ab tcache rc=$?" >> $OUT/logs/serve-ab-tcache.md
gpu_call_end
mkdir -p $OUT/perf; ROUNDS=1 OUT=$OUT/perf timeout 45 bash bench/h200-runs/2026-12-07-s54/perfstat/perfstat.sh 2>&1 | tail -24
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-ab-tcache.md | tail -16
