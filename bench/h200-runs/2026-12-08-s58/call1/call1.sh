#!/usr/bin/env bash
# Session 58's first call (~5 min). Pack built at facd4b7 plus this script:
#   PACK_SUITES="conformance" bash scripts/gpu-pack.sh, then gpuhost-old (the dist gpuhost of
#   36ff52a, session 57's code: new versions published at the rest depth) added to bin.tar.xz.
# 1. swaps under load, old against new build, side by side (scripts/probes/swap-ab.sh);
# 2. the serve bench (dist, new build);
# 3. `gpuhost bench` and `gpuhost bench --guest` twice each (new build).
# Device tool: run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
SECS=4 ROUNDS=2 CS="16 64" timeout 150 bash scripts/probes/swap-ab.sh .gpu/bin/gpuhost-old .gpu/bin/gpuhost > $OUT/logs/swap-ab.md 2>&1; echo "swap-ab rc=$?" >> $OUT/logs/swap-ab.md
BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > $OUT/logs/serve-bench.md 2>&1; echo "serve bench rc=$?" >> $OUT/logs/serve-bench.md
for i in 1 2; do
  timeout 100 .gpu/bin/gpuhost bench --json $OUT/logs/bench-$i.json > $OUT/logs/bench-$i.md 2>&1; echo "bench $i rc=$?" >> $OUT/logs/bench-$i.md
  timeout 60 .gpu/bin/gpuhost bench --guest --json $OUT/logs/bench-guest-$i.json > $OUT/logs/bench-guest-$i.md 2>&1; echo "guest bench $i rc=$?" >> $OUT/logs/bench-guest-$i.md
done
gpu_call_end
cat $OUT/machine.txt
for i in 1 2; do echo "== bench $i"; tar -xzOf $OUT/logs.tar.gz logs/bench-$i.md | grep -E '^\||rc=' | head -40; done
for i in 1 2; do echo "== guest bench $i"; tar -xzOf $OUT/logs.tar.gz logs/bench-guest-$i.md | grep -E '^\| (launch|bound|argument|guest)|rc=' | head -14; done
tar -xzOf $OUT/logs.tar.gz logs/serve-bench.md | grep -B2 -A40 "^Medians of" | grep -v '^{' | cut -c1-400
echo "== swap-ab"; tar -xzOf $OUT/logs.tar.gz logs/swap-ab.md | cut -c1-300
