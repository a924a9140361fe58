#!/usr/bin/env bash
# NOT RUN in session 53: from 11:15 to 11:57 UTC every start failed and the budget ran out. Build B:
# git apply bench/h200-runs/2026-12-07-s53/call5/offload.patch, cargo build --release -p gpuhost-cli,
# strip + xz the binary to .gpu/gpuhost-B.xz, git checkout crates/gpuhost-serve/src/invoke.rs.
# Session 53's fifth call (~2.5 min; the budget was short): serve (issue #11) after the s53-sv merge. Last,
# bench-serve.sh (BENCH_SECS=2) at the merged commit: its phases now time a request's own Store making apart
# from the warm Stores made ahead (4f558ca: at one connection "instantiate" should read ~0), and
# its new table says where a request's time goes, outside the server's clock or in it. First
# serve-ab.sh: A = this commit, B = the same with the helper's offload.patch (a request's
# teardown and refill on a blocking-pool thread when its function runs at most half as many
# requests as there are workers; offload.patch beside this script, not applied to the code), three
# alternating rounds of 3 s at 1 and 16 connections, the trusted function. Pack: PACK_SUITES=" " bash
# scripts/gpu-pack.sh, then B's stripped gpuhost xz'd to .gpu/gpuhost-B.xz; device tool run,
# carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
grep . /sys/devices/system/cpu/cpu0/cpuidle/state*/name /sys/devices/system/cpu/cpuidle/current_driver 2>&1 | head -12 > $OUT/logs/cpuidle.txt
xz -dc .gpu/gpuhost-B.xz > .gpu/bin/gpuhost-B && chmod +x .gpu/bin/gpuhost-B
ROUNDS=3 SECS=3 CS="1 16" FNS="trusted" GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests \
  timeout 90 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/bin/gpuhost-B > $OUT/logs/serve-ab.md 2>&1; echo "serve-ab rc=$?" >> $OUT/logs/serve-ab.md
BENCH_SECS=2 timeout 65 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
gpu_call_end
cat $OUT/logs/cpuidle.txt 2>/dev/null
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | head -36
tar -xzOf $OUT/logs.tar.gz logs/serve-ab.md | tail -40
