#!/usr/bin/env bash
# Session 52's second call (~4 min): gpuhost-wasm's suite on NVIDIA with the helper's
# `bound-launch.set-stream` / `enqueue` (e5d6ed51), then `gpuhost bench --guest` twice: its new
# rows (a bound launch by its own enqueue) and lone launches compared less each side's clock read
# pair (9f587e26). Pack: PACK_SUITES="gpuhost-wasm" bash scripts/gpu-pack.sh; device tool run,
# carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
run_watched 200 "$OUT/logs/tests.log" bash .gpu/run.sh "${GPU_TEST_SKIPS[@]}"; echo "tests rc=$?" >> "$OUT/logs/tests.log"
for i in 1 2; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt" | head -3
tar -xzOf "$OUT/logs.tar.gz" logs/tests.log | grep -E '^test result:|FAILED|panicked|rc=' | head -20
for i in 1 2; do tar -xzOf "$OUT/logs.tar.gz" "logs/bench-guest-$i.md" | grep -E 'alone|clock|graph-batched|raw driver, graph|rc=' | head -24; done
