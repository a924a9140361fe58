#!/usr/bin/env bash
# Session 45's first call (~9 min), at the commit packed (guest writes straight from locked guest
# memory): every GPU suite both ways (scripts/gpu.sh tests: gpuhost's new locked-memory tests,
# gpuhost-wasm's locked-writes and reused-memory red team), then `gpuhost bench --guest` twice
# (issue #12's guest write against raw pinned, its first two writes apart).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s45/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
SKIP_FIXTURES=1 SKIP_PROBE=1 OUT="$OUT/logs/suites" bash scripts/gpu.sh tests > "$OUT/logs/suites.txt" 2>&1
for i in 1 2; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/suites.txt | tail -40
tar -xzOf "$OUT/logs.tar.gz" logs/bench-guest-1.md logs/bench-guest-2.md | grep -E 'host → device|Guest write|rc=' | head -12
