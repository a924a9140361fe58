#!/usr/bin/env bash
# Session 53's fourth call (~3 min): is the transfer table's pageable upload (0.61-0.64x raw
# pinned on call 1's lease) below the sweep's default row (0.67-0.71x, same configuration, same
# process) because gpuhost's copy helpers park (after 200 us of spinning) while the table's raw
# copies run between its rounds, and wake late? `gpuhost bench` at faebfae alternated with a
# diagnostic build of the same commit whose helpers spin 50 ms before parking (copy.rs's SPIN;
# built here, not committed: .gpu/gpuhost-spin50ms.xz), twice each.
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
xz -dc .gpu/gpuhost-spin50ms.xz > .gpu/bin/gpuhost-spin50ms && chmod +x .gpu/bin/gpuhost-spin50ms
for i in 1 2; do
  for b in gpuhost gpuhost-spin50ms; do
    timeout 140 .gpu/bin/$b bench --json $OUT/logs/$b-$i.json > $OUT/logs/$b-$i.md 2>&1; echo "$b $i rc=$?" >> $OUT/logs/$b-$i.md
  done
done
gpu_call_end
for i in 1 2; do for b in gpuhost gpuhost-spin50ms; do
  echo "== $b run $i"; tar -xzOf $OUT/logs.tar.gz logs/$b-$i.md | grep -E '64 MiB \| [0-9.]+ \| [0-9.]+ \| pageable|default \||rc='
done; done
