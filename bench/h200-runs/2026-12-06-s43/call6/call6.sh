#!/usr/bin/env bash
# Session 43's sixth call (~4 min): issue #12's benchmarks twice at the commit packed, on the
# card the tool lends: `gpuhost bench` and `gpuhost bench --guest` (scripts/gpu.sh bench's
# first half; serve and the launch probe left out for the device time left).
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call6/call6.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests" SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
out=$OUT/c6; mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(tr '\n' ' ' < .gpu/COMMIT)"; date -u; } > "$out/machine.txt"
for i in 1 2; do
  timeout 140 .gpu/bin/gpuhost bench --json "$out/bench-$i.json" > "$out/bench-$i.md" 2>&1
  echo "bench $i rc=$?" >> "$out/bench-$i.md"
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$out/bench-guest-$i.json" > "$out/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$out/bench-guest-$i.md"
  tar -C "$OUT" -czf "$OUT/call6.tar.gz" c6
done
cat "$out/machine.txt"; grep -hE 'rc=' "$out"/*.md
