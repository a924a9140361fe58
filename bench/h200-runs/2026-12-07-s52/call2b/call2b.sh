#!/usr/bin/env bash
# Session 52's call 2b, on call 2's machine while still warm (37 s): `gpuhost bench --guest` twice
# more (runs 3 and 4 of the same build), for the spread. Pack as call 2; carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
for i in 3 4; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
gpu_call_end
