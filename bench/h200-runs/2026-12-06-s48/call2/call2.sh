#!/usr/bin/env bash
# Session 48's second call (~8 min), at the session's code after the merges (guest memory's
# pool fixes, serve's error bodies and per-client cap, half-close reverted, the cut-short test's
# diagnostics): every GPU suite both ways (scripts/gpu.sh tests, 60 generated sandbox programs of
# each kind), gpuhost-cli's suite four more times at 16 threads (the cut-short test failed 1 of 7
# such runs in call 1), and issue #11's serve benchmark twice (a request id per response now).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s48/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
SANDBOX_GEN_CASES=60 SKIP_FIXTURES=1 SKIP_PROBE=1 OUT="$OUT/logs/suites" bash scripts/gpu.sh tests > "$OUT/logs/suites.txt" 2>&1
cli=$(grep -n 'gpuhost-cli' .gpu/run-parallel.sh | head -1 | cut -d: -f1)
for i in 1 2 3 4; do
  # gpuhost-cli's suite alone (its line of .gpu/run-parallel.sh), at the default 16 threads.
  (sed -n "1,3p;${cli}p;\$p" .gpu/run-parallel.sh > .gpu/run-cli.sh; timeout 80 bash .gpu/run-cli.sh "${GPU_TEST_SKIPS[@]}") \
    > "$OUT/logs/cli-parallel-$i.log" 2>&1
  echo "cli 16 threads, run $i rc=$?" >> "$OUT/logs/cli-parallel-$i.log"
done
for i in 1 2; do
  OUT="$OUT/logs/s$i" BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > "$OUT/logs/serve-$i.md" 2>&1
  echo "serve bench $i rc=$?" >> "$OUT/logs/serve-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/suites.txt | tail -34
for i in 1 2 3 4; do tar -xzOf "$OUT/logs.tar.gz" logs/cli-parallel-$i.log | grep -E '^test result:|FAILED|rc=' | head -4; done
tar -xzOf "$OUT/logs.tar.gz" logs/serve-1.md logs/serve-2.md | grep -E '^\| [0-9]|rc=' | head -12
