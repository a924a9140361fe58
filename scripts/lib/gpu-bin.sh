# shellcheck shell=bash
# Sourced, from the checkout root, by the scripts that run the packed binaries on the GPU machine.
# scripts/gpu-pack.sh ships .gpu/bin as one xz archive: the device tool carries at most 64 MiB
# with the tree, and the stripped binaries alone (test suites, gpuhost, oha) are about 70 MB.
# Unpacked once; later scripts find .gpu/bin there.
if [ -f .gpu/bin.tar.xz ] && [ ! -d .gpu/bin ]; then
  mkdir -p .gpu/bin && tar -C .gpu/bin -xJf .gpu/bin.tar.xz
fi

# What the packed suites need besides their binaries (scripts/gpu.sh, probes/suite-stress.sh):
# gpuhost-cli's tests run the `gpuhost` binary from the folder above their own, as cargo lays
# them out; .gpu/run-parallel.sh is .gpu/run.sh with the default test threads; GPU_TEST_SKIPS
# names the two tests the GPU machine cannot run (it has no Chromium and one GPU), and the ones
# run apart from their suite (GPU_TESTS_APART, each in a process of its own by scripts/gpu.sh).
gpu_suites_ready() {
  cp -f .gpu/bin/gpuhost .gpu/gpuhost
  sed 's/ --test-threads=1//' .gpu/run.sh > .gpu/run-parallel.sh
}
# gpuhost's foreign reset during transfers resets the primary context while other threads copy
# through it, which NVIDIA's driver leaves to the caller to avoid (cuDevicePrimaryCtxReset: "the
# calling function [must] ensure that no other module in the process is using the device"). In
# the suite it segfaulted the process twice on the H200 (sessions 26 and 28), hiding every later
# test of the suite; alone it passed 3 of 3 (bench/h200-runs/2026-12-04-s28/).
GPU_TESTS_APART=(gpuhost:context_loss::foreign_resets_during_transfers_end_them_ok_or_lost_then_transfers_work_again)
GPU_TEST_SKIPS=(--skip the_status_page --skip with_two_devices_a_function
  --skip context_loss::foreign_resets_during_transfers)

# Runs "$@" (a suite runner) for at most $1 seconds, output to $2. On an overrun it writes every
# thread of each running test binary (name and kernel wait channel) and cuda-gdb's backtraces
# (the GPU machine has no plain gdb; the packed binaries are stripped: name their frames here
# with scripts/lib/symbolize.py) into the log, then kills those binaries only: the runner goes on
# to its later suites, which get ${AFTER_OVERRUN:-120} s more before everything is killed.
# Returns the runner's status, or 124 after an overrun.
run_watched() {
  local limit=$1 log=$2 overran=0; shift 2
  # Appending, both: the dump below goes into the same log while the runner still writes.
  : > "$log"; "$@" >> "$log" 2>&1 & local pid=$!
  while :; do
    for _ in $(seq "$limit"); do
      kill -0 "$pid" 2>/dev/null || { wait "$pid"; local rc=$?; [ $overran = 1 ] && return 124; return $rc; }
      sleep 1
    done
    for p in $(pgrep -f '.gpu/bin/all-'); do
      echo "== overrun: pid $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-120)"
      for t in /proc/$p/task/*; do echo "$(cat $t/comm) $(cat $t/wchan)"; done | sort | uniq -c
      timeout 120 cuda-gdb -p "$p" -batch -ex "set pagination off" -ex "thread apply all bt 40" 2>&1 \
        | grep -v '^\[New LWP\|^warning: ' | head -c 400000
    done >> "$log"
    pkill -f '.gpu/bin/all-'
    if [ $overran = 1 ] || [ "${AFTER_OVERRUN:-120}" = 0 ]; then
      kill "$pid" 2>/dev/null; wait "$pid"; return 124
    fi
    overran=1 limit=${AFTER_OVERRUN:-120}
  done
}

# The frame of a session's GPU call script (bench/h200-runs/DATE-sN/callK/callK.sh), sourced from
# the checkout root: gpu_call_begin readies the suites, points the packed binaries at NVIDIA's
# driver, writes the machine (GPU, driver, commit, date, then whatever "$@" prints) to
# $OUT/machine.txt and makes $OUT/logs; gpu_call_end archives the logs as $OUT/logs.tar.gz
# (the device tool brings few files back), whose paths read logs/...
gpu_call_begin() {
  gpu_suites_ready
  export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "commit $(cat .gpu/COMMIT)"; date -u; "$@"; } > "$OUT/machine.txt"
  mkdir -p "$OUT/logs"
}
gpu_call_end() {
  tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
}
