#!/usr/bin/env bash
# Session 53's first call (~9 min): the benchmark phase as it stands at faebfae (bench --guest pairs each trusted pass with a native pass) (gpuhost bench
# twice, bench --guest twice, launch_probe, the serve bench against native axum), then
# sandbox_bench twice. Pack: PACK_SUITES="conformance" PACK_PROBES=1 bash scripts/gpu-pack.sh;
# device tool run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
export OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT/b"
OUT="$OUT/b" timeout 480 bash scripts/gpu.sh bench > "$OUT/bench-phase.txt" 2>&1
echo "bench phase rc=$?" >> "$OUT/bench-phase.txt"
source scripts/lib/gpu-bin.sh
for i in 1 2; do
  timeout 45 .gpu/bin/sandbox_bench --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "sandbox bench $i rc=$?" >> "$OUT/sandbox-$i.md"
done
head -3 "$OUT/b/machine.txt" 2>/dev/null
tail -60 "$OUT/bench-phase.txt"
for i in 1 2; do tail -4 "$OUT/sandbox-$i.md"; done
