#!/usr/bin/env bash
# Session 45's fourth call (~6 min), at the session's last code (call 1's script again): every GPU
# suite both ways (scripts/gpu.sh tests), then `gpuhost bench --guest` twice (the guest write
# against raw pinned, its first two writes apart).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s45/call4/call4.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_suites_ready
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
SKIP_FIXTURES=1 SKIP_PROBE=1 OUT="$OUT/logs/suites" bash scripts/gpu.sh tests > "$OUT/logs/suites.txt" 2>&1
for i in 1 2; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/suites.txt | tail -40
tar -xzOf "$OUT/logs.tar.gz" logs/bench-guest-1.md logs/bench-guest-2.md | grep -E 'host → device|Guest write|rc=' | head -12
