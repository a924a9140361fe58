#!/usr/bin/env bash
# Session 53's second call (~1 min, same H100 lease as call1, pack of call1): `gpuhost bench
# --guest` three more times, for the spread of the per-pair ratios (each trusted pass against the
# native pass just before it, faebfae).
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
for i in 3 4 5; do timeout 90 .gpu/bin/gpuhost bench --guest --json $OUT/logs/bench-guest-$i.json > $OUT/logs/bench-guest-$i.md 2>&1; echo "guest bench $i rc=$?" >> $OUT/logs/bench-guest-$i.md; done
gpu_call_end
for i in 3 4 5; do tar -xzOf $OUT/logs.tar.gz logs/bench-guest-$i.md | grep -A6 -E "Each trusted|each side less its own" | grep "^|"; done
