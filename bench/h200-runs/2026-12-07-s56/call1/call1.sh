#!/usr/bin/env bash
# Session 56's GPU call (~5 min): the shipped binary built with whole-program LTO (Cargo's `dist`
# profile: lto = "fat", codegen-units = 1) against the release build, on serve's CPU per request
# and the guest launch paths, then the serve bench with the dist binary (its /metrics time the
# guest run's CPU until its response: session 55's call7 question, is respond's spread at one
# connection CPU time or waiting?).
# Pack: PACK_SUITES=" " PACK_RELEASE_TOO=1 bash scripts/gpu-pack.sh (gpuhost is the dist build,
# gpuhost-rel the release build), then rm -rf .gpu/perf.tar.xz .gpu/sandbox .gpu/lib (64 MiB with
# the tree). Device tool: run, carry [".gpu"]. With a short budget: AB_ROUNDS=2 AB_SECS=2
# GUEST_BUILDS="" (~2.5 min).
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
# 1. serve: release (A) against dist (B), sandboxed http-stamp, alternating rounds.
ROUNDS=${AB_ROUNDS:-3} SECS=${AB_SECS:-3} CS="1 16 64" FNS="sandboxed" timeout 150 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost-rel .gpu/bin/gpuhost > $OUT/logs/serve-ab-lto.md 2>&1; echo "serve-ab lto rc=$?" >> $OUT/logs/serve-ab-lto.md
# 2. the serve bench, dist binary (native handler and serve both from it).
BENCH_SECS=2 timeout 70 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
# 3. the guest launch bench, release then dist (GUEST_BUILDS="" skips it; AB_ROUNDS and AB_SECS
#    shorten step 1, for a short budget): launches and their ratios to native
#    gpuhost are measured within each run, so each run's ratios compare that build's guest path
#    with the same build's native path.
for b in ${GUEST_BUILDS-rel dist}; do
  bin=.gpu/bin/gpuhost; [ "$b" = dist ] || bin=.gpu/bin/gpuhost-rel
  timeout 80 $bin bench --guest --json $OUT/logs/bench-guest-$b.json > $OUT/logs/bench-guest-$b.md 2>&1; echo "guest bench $b rc=$?" >> $OUT/logs/bench-guest-$b.md
done
gpu_call_end
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-ab-lto.md | tail -22
for b in ${GUEST_BUILDS-rel dist}; do echo "== guest bench $b"; tar -xzOf $OUT/logs.tar.gz logs/bench-guest-$b.md | grep -E '^\| (launch|bound|argument|guest)|rc=' | head -14; done
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | grep -B2 -A40 "^Medians of" | grep -v '^{' | cut -c1-400
