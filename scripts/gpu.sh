#!/usr/bin/env bash
# Run on the GPU machine with .gpu/ carried along (built here by scripts/gpu-pack.sh): the packed
# GPU test suites, then the benchmarks; logs into $OUT, a short table last.
#   device tool: run  command="bash scripts/gpu.sh"  carry=[".gpu"]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=nvidia                  # on the GPU, never fall back to softcuda silently
export GPUHOST_GUEST_DIR="$PWD/.gpu/guests"   # prebuilt guests: no cargo there
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT | tr '\n' ' ')"; date -u; } > "$out/machine.txt"

# Facts the PTX sandbox relies on (address windows, abort-word polling), from a CUDA C probe.
[ -n "${SKIP_PROBE:-}" ] || timeout 150 bash scripts/probes/sandbox-probe.sh > "$out/probe.log" 2>&1
[ -n "${SKIP_FIXTURES:-}" ] || bash scripts/gpu-fixtures.sh > "$out/fixtures.log" 2>&1 || echo "fixtures: FAILED (see fixtures.log)"
.gpu/bin/gpuhost doctor >> "$out/machine.txt" 2>&1; doctor=$?
timeout 420 bash .gpu/run.sh "$@" > "$out/tests.log" 2>&1; tests=$?
# Once more with the default thread count (16 here): concurrency bugs that CI's two threads miss
# showed up this way (see bench/h200-runs/2026-11-30-parallel-*).
sed 's/ --test-threads=1//' .gpu/run.sh > .gpu/run-parallel.sh
parallel=skipped
[ -n "${SKIP_PARALLEL:-}" ] || { timeout 300 bash .gpu/run-parallel.sh "$@" > "$out/tests-parallel.log" 2>&1; parallel=$?; }
if [ -z "${SKIP_BENCH:-}" ]; then
  # Kernel time with the PTX sandbox against without, every corpus kernel (issue #9).
  timeout 120 .gpu/bin/sandbox_bench --json "$out/sandbox.json" > "$out/sandbox.md" 2>&1
  [ -z "${BENCH_TWICE:-}" ] || timeout 120 .gpu/bin/sandbox_bench --json "$out/sandbox-2.json" > "$out/sandbox-2.md" 2>&1
  timeout 150 .gpu/bin/gpuhost bench --json "$out/bench.json" > "$out/bench.md" 2>&1; bench=$?
  # A second run shows the spread between runs (METHOD: a difference smaller than that is noise).
  [ -z "${BENCH_TWICE:-}" ] || timeout 150 .gpu/bin/gpuhost bench --json "$out/bench-2.json" > "$out/bench-2.md" 2>&1
  if .gpu/bin/gpuhost bench --help 2>/dev/null | grep -q -- '--guest'; then
    timeout 100 .gpu/bin/gpuhost bench --guest --json "$out/bench-guest.json" > "$out/bench-guest.md" 2>&1
    bench="$bench/$?"
    [ -z "${BENCH_TWICE:-}" ] || timeout 100 .gpu/bin/gpuhost bench --guest --json "$out/bench-guest-2.json" > "$out/bench-guest-2.md" 2>&1
  fi
fi

head -40 "$out/machine.txt"
grep -vE '^ptxas info' "$out/probe.log" 2>/dev/null | tail -30
tail -4 "$out/sandbox.md" "$out/sandbox-2.md" 2>/dev/null
echo; cat "$out/bench.md" "$out/bench-2.md" "$out/bench-guest.md" "$out/bench-guest-2.md" 2>/dev/null
echo; grep -E '^== |^test result:|FAILED|panicked|^failures:|skipped' "$out/tests.log" | head -60
echo "-- again with parallel test threads:"
grep -E '^== |^test result:|FAILED|panicked' "$out/tests-parallel.log" | head -30
echo; echo "doctor=$doctor tests=$tests tests-parallel=$parallel bench=${bench:-skipped}"
# The device tool brings back a few files only: everything goes back as one archive.
tar -czf /tmp/logs.tar.gz -C "$out" . && mv /tmp/logs.tar.gz "$out/" && find "$out" -type f ! -name logs.tar.gz -delete
