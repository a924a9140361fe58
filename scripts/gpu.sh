#!/usr/bin/env bash
# Run on the GPU machine with .gpu/ carried along (built here by scripts/gpu-pack.sh): the packed
# GPU test suites and the sandbox checks, then the benchmarks; logs into $OUT (one archive), a
# short table last. One device call runs at most 10 minutes, so the work is split in two phases:
#   device tool: run  command="bash scripts/gpu.sh tests"   carry=[".gpu"]   (~5 min)
#   device tool: run  command="bash scripts/gpu.sh bench"   carry=[".gpu"]   (~8 min)
# `bash scripts/gpu.sh all` runs both. Extra arguments after the phase filter the test names.
# Switches: SKIP_PROBE, SKIP_PARALLEL, SKIP_FIXTURES (fixtures need nvcc), BENCH_ONCE,
# SANDBOX_ABLATE (bench: sandbox_bench --ablate too).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-bin.sh
phase="${1:-all}"; shift || true
out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=nvidia                  # on the GPU, never fall back to softcuda silently
export GPUHOST_GUEST_DIR="$PWD/.gpu/guests"   # prebuilt guests: no cargo there
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
# conformance's generated programs: more on NVIDIA than CI's 24 of each, since only here do they
# meet NVIDIA's JIT (which miscompiled one shape of polled loop: docs/ISOLATION.md).
export SANDBOX_GEN_CASES="${SANDBOX_GEN_CASES:-150}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT | tr '\n' ' ')"; date -u; } > "$out/machine.txt"
.gpu/bin/gpuhost doctor >> "$out/machine.txt" 2>&1; doctor=$?
head -12 "$out/machine.txt"

if [ "$phase" = tests ] || [ "$phase" = all ]; then
  # Facts the PTX sandbox relies on (address windows, abort-word polling), from a CUDA C probe.
  [ -n "${SKIP_PROBE:-}" ] || timeout 60 bash scripts/probes/sandbox-probe.sh > "$out/probe.log" 2>&1
  # NVIDIA's JIT on every rewritten module, and the red-team kernels on a real arena (stdout
  # unbuffered: a run stopped at its limit still shows how far it got).
  if [ -d .gpu/sandbox ]; then
    timeout 100 stdbuf -o0 -e0 bash scripts/sandbox-probe.sh run > "$out/sandbox-probe.log" 2>&1
    echo "sandbox-probe rc=$?" >> "$out/sandbox-probe.log"
    # Whether ptxas keeps the values the fences trust out of uniform registers (the opaque zero).
    timeout 120 bash scripts/probes/sass-uniform.sh > "$out/sass-uniform.log" 2>&1
  fi
  [ -n "${SKIP_FIXTURES:-}" ] || bash scripts/gpu-fixtures.sh > "$out/fixtures.log" 2>&1 || echo "fixtures: FAILED (see fixtures.log)"
  gpu_suites_ready
  set -- "$@" "${GPU_TEST_SKIPS[@]}"
  # One limit for every suite together (a hung test shows as an overrun, with stacks). More
  # generated programs take longer: conformance alone ran 181 s with SANDBOX_GEN_CASES=200 on
  # an H100 (session 38), which left gpuhost-wasm's suite cut off at 200.
  run_watched $((200 + ${SANDBOX_GEN_CASES:-0})) "$out/tests.log" bash .gpu/run.sh "$@"; tests=$?
  # The tests run apart (gpu-bin.sh says why): a crash there is reported, and hides nothing.
  for t in "${GPU_TESTS_APART[@]}"; do
    timeout 120 bash scripts/probes/each-test.sh "${t%%:*}" "${t#*:}" >> "$out/tests-apart.log" 2>&1
  done
  # Once more with the default thread count (16 here): concurrency bugs that CI's two threads
  # miss showed up this way (bench/RESULTS.md, 2026-11-30).
  parallel=skipped
  [ -n "${SKIP_PARALLEL:-}" ] || { AFTER_OVERRUN=30 run_watched 120 "$out/tests-parallel.log" bash .gpu/run-parallel.sh "$@"; parallel=$?; }
  # Kernel time with the PTX sandbox against without, every corpus kernel (issue #9), twice.
  for i in 1 2; do
    timeout 60 .gpu/bin/sandbox_bench --json "$out/sandbox-$i.json" > "$out/sandbox-$i.md" 2>&1
  done
  grep -vE '^ptxas info|^    ' "$out/probe.log" 2>/dev/null | tail -32
  grep -E '^JIT:|FAIL|FATAL|stopped|PASSED|rc=' "$out/sandbox-probe.log" 2>/dev/null | tail -30
  tail -4 "$out/sass-uniform.log" 2>/dev/null
  tail -3 "$out/sandbox-1.md" "$out/sandbox-2.md" 2>/dev/null
  grep -E '^== |^test result:|FAILED|panicked|^failures:|skipped' "$out/tests.log" | head -60
  echo "-- run apart:"; grep -E '^(ok|FAILED|CRASHED)|^each-test' "$out/tests-apart.log"
  echo "-- again with parallel test threads:"
  grep -E '^== |^test result:|FAILED|panicked' "$out/tests-parallel.log" | head -30
  echo "doctor=$doctor tests=$tests tests-parallel=$parallel"
fi

if [ "$phase" = bench ] || [ "$phase" = all ]; then
  runs="1 2"; [ -z "${BENCH_ONCE:-}" ] || runs=1
  # Each benchmark twice: a difference smaller than the spread between runs is noise (METHOD).
  for i in $runs; do
    timeout 140 .gpu/bin/gpuhost bench --json "$out/bench-$i.json" > "$out/bench-$i.md" 2>&1
    echo "bench $i rc=$?" >> "$out/bench-$i.md"
    timeout 90 .gpu/bin/gpuhost bench --guest --json "$out/bench-guest-$i.json" > "$out/bench-guest-$i.md" 2>&1
    echo "guest bench $i rc=$?" >> "$out/bench-guest-$i.md"
  done
  # Which part of the sandbox a short kernel's graph replay pays for (issue #9), when asked.
  if [ -n "${SANDBOX_ABLATE:-}" ]; then
    timeout 150 .gpu/bin/sandbox_bench --ablate > "$out/sandbox-ablate.md" 2>&1
    echo "sandbox ablate rc=$?" >> "$out/sandbox-ablate.md"
  fi
  # Where launch issue and .await time goes (crates/gpuhost/examples/launch_probe.rs).
  timeout 60 .gpu/bin/launch_probe > "$out/launch-probe.txt" 2>&1; echo "launch probe rc=$?" >> "$out/launch-probe.txt"
  if [ -x .gpu/bin/oha ]; then
    BENCH_SECS="${BENCH_SECS:-3}" timeout 70 bash scripts/bench-serve.sh > "$out/serve-bench.md" 2>&1
    echo "serve bench rc=$?" >> "$out/serve-bench.md"
  fi
  cat "$out"/bench-1.md "$out"/bench-guest-1.md 2>/dev/null | grep -E '^\||rc=' | head -70
  grep -E 'rc=' "$out"/bench-2.md "$out"/bench-guest-2.md 2>/dev/null
  # Each guest run's pass-by-pass ratios (how far one run's guest/native can move).
  grep -h -A6 '^Each trusted pass' "$out"/bench-guest-*.md 2>/dev/null | grep -E '^\| (launch|bound)'
  tail -25 "$out/serve-bench.md" 2>/dev/null
  [ -z "${SANDBOX_ABLATE:-}" ] || tail -30 "$out/sandbox-ablate.md"
fi

# The device tool brings back a few files only: everything goes back as one archive.
tar -czf /tmp/logs.tar.gz -C "$out" . && mv /tmp/logs.tar.gz "$out/" && find "$out" -type f ! -name logs.tar.gz -delete
