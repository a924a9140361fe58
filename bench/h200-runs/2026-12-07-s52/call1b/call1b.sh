#!/usr/bin/env bash
# Session 52's call 1b, on call 1's machine while still warm (31 s): `gpuhost bench` twice, for
# the transfer table's pageable rows and the staging sweep in two more runs of the same lease.
# Pack as call 1; device tool run, carry [".gpu"], this command from the checkout root.
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
for i in 1 2; do
  timeout 100 .gpu/bin/gpuhost bench --json "$OUT/logs/bench-$i.json" > "$OUT/logs/bench-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/bench-$i.md"
done
gpu_call_end
for i in 1 2; do tar -xzOf "$OUT/logs.tar.gz" "logs/bench-$i.md" | grep -E 'upload|download|Pageable|default|rc=|pinned' | head -20; done
