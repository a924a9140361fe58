#!/usr/bin/env bash
# Session 49's GPU call (~4 min), NOT RUN: session 49 got no device machine (fourteen starts got
# none and ten calls were refused, 22:04-23:39 UTC, until too little device time was left). For the next
# session, at branch s49-mbar (f6d3275: a failed software mbarrier wait sleeps 50 ns):
#  1. scripts/probes/staging-ceiling.c: the best pageable transfer a plain C pipeline gets on this
#     machine, beside raw pinned and pageable cuMemcpy (issue #12: is 0.7x pinned reachable?);
#  2. sandbox_bench --ablate on mbarrier_pipeline with each of variants/ (make.sh, made from the
#     rewrite without the sleep) as its "from file" column: sleeps of 20, 50, 200 ns after a
#     failed wait test (the sandboxed column is the branch's 50 ns; make.sh also makes relaxed-load
#     variants);
#  3. the whole sandbox_bench twice;
#  4. conformance's suite at 16 test threads (the mbarrier cases through NVIDIA's JIT).
# To run it:
#   cargo build --release -p ptxvm --example sandbox_dump        # on main, without the sleep
#   bash bench/h200-runs/2026-12-06-s49/call1/variants/make.sh
#   git checkout s49-mbar; PACK_SUITES="conformance" bash scripts/gpu-pack.sh
#   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s49/call1/call1.sh"  carry=[".gpu"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
export CONFORMANCE_CORPUS=$PWD/corpus
cc -O2 -pthread -I/usr/local/cuda/include scripts/probes/staging-ceiling.c -L/usr/local/nvidia/lib64 \
  -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/sc > "$OUT/logs/staging.txt" 2>&1 && timeout 120 /tmp/sc >> "$OUT/logs/staging.txt" 2>&1
echo "rc=$?" >> "$OUT/logs/staging.txt"
variants="base ns20 ns50 ns200 relaxed relaxed_ns50"
for v in $variants; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline SANDBOX_BENCH_FILE="mbarrier_pipeline=$here/variants/$v.ptx" \
    timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/logs/ablate-$v.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/ablate-$v.md"
done
# SHORT=1 (a call with little device time left): one bench run, no conformance suite.
runs="1 2"; [ "${SHORT:-0}" = 1 ] && runs=1
for i in $runs; do
  timeout 90 .gpu/bin/sandbox_bench --json "$OUT/logs/sandbox-$i.json" > "$OUT/logs/sandbox-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/sandbox-$i.md"
done
if [ "${SHORT:-0}" != 1 ]; then
  timeout 60 bash .gpu/run-parallel.sh > "$OUT/logs/conformance-parallel.log" 2>&1
  echo "rc=$?" >> "$OUT/logs/conformance-parallel.log"
fi
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/staging.txt | head -30
for v in $variants; do
  echo "== $v"; tar -xzOf "$OUT/logs.tar.gz" "logs/ablate-$v.md" | grep -E 'from file|^\| (mbarrier_pipeline|kernel)|rc=' | head -6
done
tar -xzOf "$OUT/logs.tar.gz" logs/conformance-parallel.log 2>/dev/null | grep -E '^test result:|FAILED|panicked|rc=' | head -8
for i in $runs; do tar -xzOf "$OUT/logs.tar.gz" logs/sandbox-$i.md | grep -E 'geometric|graph-replayed|mbarrier_pipeline|rc='; done
