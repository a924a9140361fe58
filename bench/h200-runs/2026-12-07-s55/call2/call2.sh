#!/usr/bin/env bash
# Session 55's second call (~9 min): the benchmark phase at HEAD (gpuhost bench twice, bench
# --guest twice, launch_probe, the serve bench against native axum: scripts/gpu.sh bench), then
# sandbox_bench twice, and the latency tail of serve and native from oha's JSON (at one
# connection serve's p99 is 3.3x its p50, native's 1.4x: where does the tail start?).
# Pack: PACK_SUITES="conformance" PACK_PROBES=1 bash scripts/gpu-pack.sh; device tool run,
# carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
export OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT/b"
OUT="$OUT/b" timeout 480 bash scripts/gpu.sh bench > "$OUT/bench-phase.txt" 2>&1
echo "bench phase rc=$?" >> "$OUT/bench-phase.txt"
for i in 1 2; do
  timeout 45 .gpu/bin/sandbox_bench --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "sandbox bench $i rc=$?" >> "$OUT/sandbox-$i.md"
done
mkdir -p /tmp/sb && tar -xzf "$OUT/b/logs.tar.gz" -C /tmp/sb ./serve-bench 2>/dev/null
python3 bench/h200-runs/2026-12-07-s55/call2/tail.py /tmp/sb/serve-bench > "$OUT/tail.md" 2>&1
head -3 "$OUT/b/machine.txt" 2>/dev/null
tail -60 "$OUT/bench-phase.txt"
for i in 1 2; do tail -4 "$OUT/sandbox-$i.md"; done
cat "$OUT/tail.md"
