#!/usr/bin/env bash
# Runs the packed GPU suites again and again to catch a rare hang or crash (issue #12: with
# e209a8f, later reverted, gpuhost-wasm's flood test hung with one thread after the other suites,
# and gpuhost's parallel suite died once of a segmentation fault; neither showed when run alone).
# On the GPU machine, carry [".gpu"]:   ROUNDS=3 bash scripts/probes/suite-stress.sh
# Each round runs .gpu/run.sh with one thread, then every suite with parallel threads; a run past
# its limit gets each of its threads' name and kernel wait channel written down before it is
# killed, with every thread's backtrace from cuda-gdb (the GPU machine has no plain gdb; the packed
# binaries are stripped: name their frames here with scripts/lib/symbolize.py). Logs and a summary go to $OUT/stress. Env: ROUNDS (3),
# LIMIT_ONE / LIMIT_PARALLEL (200 / 120 s per round), GPUHOST_DRIVER (nvidia), ONLY (run only the
# suites whose crate path matches this pattern, e.g. ONLY=gpuhost-wasm), PARALLEL (1: also run
# with parallel threads; 0: one thread only).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia} GPUHOST_GUEST_DIR="$PWD/.gpu/guests" SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
out="${OUT:-/tmp/out}/stress"; mkdir -p "$out"
gpu_suites_ready
if [ -n "${ONLY:-}" ]; then
  grep -v '^echo "== ' .gpu/run.sh | grep -v "(crates/" > .gpu/run-only.sh
  grep "(crates/[^)]*${ONLY}[^)]*)" .gpu/run.sh >> .gpu/run-only.sh
  sed -i '/^exit/d' .gpu/run-only.sh; echo 'exit $fail' >> .gpu/run-only.sh
  sed 's/ --test-threads=1//' .gpu/run-only.sh > .gpu/run-only-parallel.sh
  one=.gpu/run-only.sh par=.gpu/run-only-parallel.sh
else
  one=.gpu/run.sh par=.gpu/run-parallel.sh
fi

for r in $(seq "${ROUNDS:-3}"); do
  AFTER_OVERRUN=0 run_watched "${LIMIT_ONE:-200}" "$out/one-thread-$r.log" bash "$one" "${GPU_TEST_SKIPS[@]}"; a=$?
  b=skipped
  if [ "${PARALLEL:-1}" = 1 ]; then
    AFTER_OVERRUN=0 run_watched "${LIMIT_PARALLEL:-120}" "$out/parallel-$r.log" bash "$par" "${GPU_TEST_SKIPS[@]}"; b=$?
  fi
  echo "round $r: one thread rc=$a, parallel rc=$b" | tee -a "$out/summary.txt"
  grep -hE 'Segmentation|overrun|FAILED' "$out/one-thread-$r.log" "$out/parallel-$r.log" 2>/dev/null | head -5
  [ "$a" = 0 ] && { [ "$b" = 0 ] || [ "$b" = skipped ]; } || failed=1
done
# The status is the rounds', not the last grep's (which fails when it finds nothing to show).
exit "${failed:-0}"
