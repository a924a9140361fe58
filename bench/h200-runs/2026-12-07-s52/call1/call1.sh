#!/usr/bin/env bash
# Session 52's first call (~5 min): session 51's call2 (bench/h200-runs/2026-12-07-s51/call2/call2.sh:
# the C pipeline with each kind of staging memory, then `gpuhost bench` once with its page-locked
# counts), then this build's guest benchmark twice (issue #12's guest-launch rows) and the serve
# benchmark (issue #11), none of which ran on NVIDIA since session 48.
# Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh (oha inside); device tool run, carry [".gpu"].
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
bash bench/h200-runs/2026-12-07-s51/call2/call2.sh
mkdir -p "$OUT/s51-call2" && mv "$OUT"/logs.tar.gz "$OUT"/machine.txt "$OUT/s51-call2/" 2>/dev/null
source scripts/lib/gpu-bin.sh
gpu_call_begin
for i in 1 2; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
OUT="$OUT/logs" BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > "$OUT/logs/serve-bench.md" 2>&1
echo "serve bench rc=$?" >> "$OUT/logs/serve-bench.md"
gpu_call_end
for i in 1 2; do tar -xzOf "$OUT/logs.tar.gz" "logs/bench-guest-$i.md" | grep -E '^\| .*(alone|burst|write|pinned|replay)|rc=' | head -16; done
tar -xzOf "$OUT/logs.tar.gz" logs/serve-bench.md | tail -22
