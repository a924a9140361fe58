#!/usr/bin/env bash
# Session 57's third call (82 s, the lease of calls 1 and 2, warm): `bench --guest` twice per
# build, alternating release then dist, so that each build's guest launch ratios have a spread.
# Pack and device tool as session 56's call1 (carry [".gpu"]).
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin; export GPUHOST_DRIVER=nvidia
for i in 1 2; do for b in rel dist; do
  bin=.gpu/bin/gpuhost; [ $b = dist ] || bin=.gpu/bin/gpuhost-rel
  timeout 60 $bin bench --guest --json $OUT/logs/bench-guest-$b-$i.json > $OUT/logs/bench-guest-$b-$i.md 2>&1; echo "rc=$?" >> $OUT/logs/bench-guest-$b-$i.md
done; done
gpu_call_end
