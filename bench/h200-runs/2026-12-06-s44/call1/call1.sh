#!/usr/bin/env bash
# Session 44's first call (~7 min): every suite on NVIDIA's driver at the commit packed (launches
# count their start in the control block; the watchdog charges a launch from its start, and the
# red team's new test queues a guest behind an attacker whose kernel fills every SM), with
# sandbox_bench twice over every corpus kernel (scripts/gpu.sh tests); then the red team's
# endless-kernel test twice more, printing how long each runaway launch took to be stopped
# (its 300 ms limit plus the watchdog's lateness; issue #9's goal: at most 10 ms late).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
final=$OUT
OUT=$final/tests SKIP_FIXTURES=1 SKIP_PROBE=1 bash scripts/gpu.sh tests > "$final/tests-summary.txt" 2>&1
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests" SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
bin=$(grep "(crates/gpuhost-wasm)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
root=$PWD
for i in 1 2; do
  (cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR=$PWD timeout 120 "$root/.gpu/bin/$bin" --exact \
    redteam::an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on --nocapture 2>&1) \
    | grep -E "stopped after|test result" >> "$final/endless-stops.txt"
done
tail -40 "$final/tests-summary.txt"
tar -xzOf "$final/tests/logs.tar.gz" ./tests.log | grep -E 'a_guest_queued|every_launch_counts|held_off' || echo "new tests: not in tests.log"
cat "$final/endless-stops.txt"
