#!/usr/bin/env bash
# Session 47's first call (~8 min), at the commit packed (abfbac8, sessions 45–46's last code,
# none of which had run on NVIDIA since session 45's fdc7293): every GPU suite both ways
# (scripts/gpu.sh tests, sandbox_bench twice among them), issue #11's serve benchmark twice
# (scripts/bench-serve.sh, 3 s rounds), then issue #12's guest benchmark twice.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s47/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
SKIP_FIXTURES=1 SKIP_PROBE=1 OUT="$OUT/logs/suites" bash scripts/gpu.sh tests > "$OUT/logs/suites.txt" 2>&1
for i in 1 2; do
  OUT="$OUT/logs/s$i" BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > "$OUT/logs/serve-$i.md" 2>&1
  echo "serve bench $i rc=$?" >> "$OUT/logs/serve-$i.md"
done
for i in 1 2; do
  timeout 60 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/suites.txt | tail -40
tar -xzOf "$OUT/logs.tar.gz" logs/serve-1.md logs/serve-2.md | grep -E '^\||rc=' | head -30
tar -xzOf "$OUT/logs.tar.gz" logs/bench-guest-1.md logs/bench-guest-2.md | grep -E 'alone on an idle|graph-batched|host → device|Guest write|rc=' | head -16
