#!/usr/bin/env bash
# Session 47's second call (~7 min), at the session's code after the merges (the serve admission
# and connection cap, --control-listen, the per-guest locked-memory tally, call 1's two test
# fixes): every GPU suite both ways (scripts/gpu.sh tests, 60 generated sandbox programs of each
# kind rather than 150: call 1 ran 150 at abfbac8), issue #11's serve benchmark twice (the body
# is now read before admission).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s47/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
SANDBOX_GEN_CASES=60 SKIP_FIXTURES=1 SKIP_PROBE=1 OUT="$OUT/logs/suites" bash scripts/gpu.sh tests > "$OUT/logs/suites.txt" 2>&1
for i in 1 2; do
  OUT="$OUT/logs/s$i" BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > "$OUT/logs/serve-$i.md" 2>&1
  echo "serve bench $i rc=$?" >> "$OUT/logs/serve-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/suites.txt | tail -34
tar -xzOf "$OUT/logs.tar.gz" logs/serve-1.md logs/serve-2.md | grep -E '^\| [0-9]|rc=' | head -12
