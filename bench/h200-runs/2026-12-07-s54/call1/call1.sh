#!/usr/bin/env bash
# RAN in session 55 (15:24 UTC, an H100 lease, the pack at 3f32e86 as below): its logs are in
# bench/h200-runs/2026-12-07-s55/call1/ and its results in bench/RESULTS.md, session 55.
# Session 54's GPU call (~4.5 min; the budget was short after failed starts). Pack at 3f32e86:
#   PACK_SUITES=" " bash scripts/gpu-pack.sh; then, built from the same tree, gpuhost-A (3f32e86
#   with malloc.rs's JEMALLOC_CONF as before 4ef1d04: no tcache_gc_incr_bytes) and gpuhost-C
#   (3f32e86 + bench/h200-runs/2026-12-07-s53/call5/offload.patch), strip --strip-debug, packed
#   with gpuhost and oha into one .gpu/bin.tar.xz (xz -9: the three binaries share most bytes);
#   .gpu/sandbox and .gpu/lib left out (64 MiB); .gpu/perf.tar.xz kept. Device tool: run, carry [".gpu"].
# 1. serve-ab.sh A (no tcache GC setting) vs gpuhost (4ef1d04's tcache_gc_incr_bytes:4194304):
#    callgrind counted 5% fewer instructions per request; does it show in req/s, CPU and p99?
# 2. serve-ab.sh gpuhost vs C (session 53's offload idea: a request's teardown and refill on a
#    blocking-pool thread at low load), trusted, c = 1 and 16: its first run on NVIDIA.
# 3. bench-serve.sh (BENCH_SECS=2): the serve bench at this commit, with its phase table.
# 4. perfstat.sh's counters (bench/h200-runs/2026-12-07-s54/perfstat/): a lone guest launch's cold path.
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
lscpu | grep -E 'Model name|^CPU\(s\)|NUMA node\(s\)' > $OUT/logs/lscpu.txt
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
ROUNDS=3 SECS=3 CS="1 16 64" FNS="sandboxed" timeout 130 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost-A .gpu/bin/gpuhost > $OUT/logs/serve-ab-tcache.md 2>&1; echo "serve-ab tcache rc=$?" >> $OUT/logs/serve-ab-tcache.md
ROUNDS=3 SECS=3 CS="1 16" FNS="trusted" timeout 80 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/bin/gpuhost-C > $OUT/logs/serve-ab-offload.md 2>&1; echo "serve-ab offload rc=$?" >> $OUT/logs/serve-ab-offload.md
BENCH_SECS=2 timeout 65 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
gpu_call_end
mkdir -p $OUT/perf; OUT=$OUT/perf timeout 60 bash bench/h200-runs/2026-12-07-s54/perfstat/perfstat.sh 2>&1 | tail -40
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-ab-tcache.md | tail -22
tar -xzOf $OUT/logs.tar.gz logs/serve-ab-offload.md | tail -16
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | head -40
