#!/usr/bin/env bash
# Session 44's fourth call (~1 min), at the commit packed: sandbox_bench --ablate over every
# corpus kernel twice, for the start count's new column "start count predicated" (its stores
# predicated on the %tid.x | %ctaid.x test instead of behind a branch: call 3 found the count,
# even without its stores, costs the graph-replayed geomean about 0.015, as if the divergent
# block at entry held back every warp's first loads).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call4/call4.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
for i in 1 2; do
  timeout 120 .gpu/bin/sandbox_bench --ablate > "$OUT/logs/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/ablate-$i.md"
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/ablate-1.md logs/ablate-2.md | grep -E '^\| kernel \| graph|geometric|rc=' | cut -c1-400
