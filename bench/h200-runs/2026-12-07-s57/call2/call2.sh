#!/usr/bin/env bash
# Session 57's second call (~4 min), the same pack as session 56's call1 (built at c025dfa;
# gpuhost = the dist build, gpuhost-rel = the release build): the second run of what call1
# measured once, so that each figure has its spread. The serve bench with the dist binary again,
# then `gpuhost bench` (launches and transfers against the raw driver) once per build, and
# `bench --guest` with the dist build again.
# Device tool: run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
BENCH_SECS=2 timeout 70 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
for b in dist rel; do
  bin=.gpu/bin/gpuhost; [ "$b" = dist ] || bin=.gpu/bin/gpuhost-rel
  timeout 140 $bin bench --json $OUT/logs/bench-$b.json > $OUT/logs/bench-$b.md 2>&1; echo "bench $b rc=$?" >> $OUT/logs/bench-$b.md
done
timeout 80 .gpu/bin/gpuhost bench --guest --json $OUT/logs/bench-guest-dist.json > $OUT/logs/bench-guest-dist.md 2>&1; echo "guest bench dist rc=$?" >> $OUT/logs/bench-guest-dist.md
gpu_call_end
cat $OUT/machine.txt
for b in dist rel; do echo "== bench $b"; tar -xzOf $OUT/logs.tar.gz logs/bench-$b.md | grep -E '^\||rc=' | head -40; done
echo "== guest bench dist"; tar -xzOf $OUT/logs.tar.gz logs/bench-guest-dist.md | grep -E '^\| (launch|bound|argument|guest)|rc=' | head -14
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | grep -B2 -A40 "^Medians of" | grep -v '^{' | cut -c1-400
