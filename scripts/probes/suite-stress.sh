#!/usr/bin/env bash
# Runs the packed GPU suites again and again to catch a rare hang or crash (issue #12: with
# e209a8f, later reverted, gpuhost-wasm's flood test hung with one thread after the other suites,
# and gpuhost's parallel suite died once of a segmentation fault; neither showed when run alone).
# On the GPU machine, carry [".gpu"]:   ROUNDS=3 bash scripts/probes/suite-stress.sh
# Each round runs .gpu/run.sh with one thread, then every suite with parallel threads; a run past
# its limit gets each of its threads' name and kernel wait channel written down before it is
# killed (the GPU machine has no gdb). Logs and a summary go to $OUT/stress. Env: ROUNDS (3),
# LIMIT_ONE / LIMIT_PARALLEL (200 / 120 s per round), GPUHOST_DRIVER (nvidia).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia} GPUHOST_GUEST_DIR="$PWD/.gpu/guests" SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
out="${OUT:-/tmp/out}/stress"; mkdir -p "$out"
gpu_suites_ready

# Runs "$@" for at most $1 seconds; on overrun, notes every thread of the test binary it started.
watch() {
  local limit=$1 log=$2; shift 2
  "$@" > "$log" 2>&1 & local pid=$!
  for _ in $(seq "$limit"); do kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }; sleep 1; done
  for p in $(pgrep -f '.gpu/bin/all-'); do
    echo "== overrun: pid $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-120)"
    for t in /proc/$p/task/*; do echo "$(cat $t/comm) $(cat $t/wchan)"; done | sort | uniq -c
  done >> "$log"
  pkill -f '.gpu/bin/all-'; kill "$pid" 2>/dev/null; wait "$pid"; return 124
}

for r in $(seq "${ROUNDS:-3}"); do
  watch "${LIMIT_ONE:-200}" "$out/one-thread-$r.log" bash .gpu/run.sh "${GPU_TEST_SKIPS[@]}"; a=$?
  watch "${LIMIT_PARALLEL:-120}" "$out/parallel-$r.log" bash .gpu/run-parallel.sh "${GPU_TEST_SKIPS[@]}"; b=$?
  echo "round $r: one thread rc=$a, parallel rc=$b" | tee -a "$out/summary.txt"
  grep -hE 'Segmentation|overrun|FAILED' "$out/one-thread-$r.log" "$out/parallel-$r.log" | head -5
done
