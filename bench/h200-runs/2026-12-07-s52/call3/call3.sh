#!/usr/bin/env bash
# Session 52's third call (~4 min): conformance's suite on NVIDIA (150 generated programs of each
# kind through the PTX sandbox and NVIDIA's JIT) with the helper's rewrite-time commits (lexer,
# bounds analysis, `.version` printing: output byte-identical here), then sandbox_bench twice.
# Pack: PACK_SUITES="conformance" bash scripts/gpu-pack.sh; device tool run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
export SANDBOX_GEN_CASES=150
run_watched 350 "$OUT/logs/tests.log" bash .gpu/run.sh "${GPU_TEST_SKIPS[@]}"; echo "tests rc=$?" >> "$OUT/logs/tests.log"
for i in 1 2; do
  timeout 60 .gpu/bin/sandbox_bench --json "$OUT/logs/sandbox-$i.json" > "$OUT/logs/sandbox-$i.md" 2>&1
  echo "sandbox bench $i rc=$?" >> "$OUT/logs/sandbox-$i.md"
done
gpu_call_end
head -3 "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/tests.log | grep -E '^test result:|FAILED|panicked|rc=' | head -20
for i in 1 2; do tar -xzOf "$OUT/logs.tar.gz" "logs/sandbox-$i.md" | tail -4; done
