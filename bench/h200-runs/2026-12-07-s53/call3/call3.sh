#!/usr/bin/env bash
# Session 53's third call (~35 s, same lease and pack): `gpuhost bench --guest` twice with the
# process held to four cores (taskset -c 2-5), to see whether the per-pair spread of call2 is
# the threads' placement.
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
nproc; lscpu | grep -E "Model name|Thread|NUMA node|Socket"
for i in 6 7; do timeout 90 taskset -c 2-5 .gpu/bin/gpuhost bench --guest --json $OUT/logs/bench-guest-$i.json > $OUT/logs/bench-guest-$i.md 2>&1; echo "guest bench $i (taskset -c 2-5) rc=$?" >> $OUT/logs/bench-guest-$i.md; done
gpu_call_end
for i in 6 7; do tar -xzOf $OUT/logs.tar.gz logs/bench-guest-$i.md | grep -A6 -E "Each trusted|each side less its own" | grep "^|"; done
