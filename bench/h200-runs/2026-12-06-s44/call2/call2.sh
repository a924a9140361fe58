#!/usr/bin/env bash
# Session 44's second call (~8 min), at the commit packed (each launch charged its own limit from
# its start): the red team's endless-kernel test twice, printing how long each runaway launch
# took to be stopped (300 ms limit; issue #9's goal: stopped at most 10 ms after it), and its
# queued-guest test; what counting each launch's start costs the sandboxed kernels
# (sandbox_bench --ablate over every corpus kernel, twice: "no start count", and the count
# without its time word, without its counter, and with a weak time store, beside the rewrite,
# graph-replayed, and the geometric-mean row). Call 1 found the count costs short kernels
# about 0.08 µs (graph-replayed geomean 1.049 -> 1.071).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_suites_ready
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
bin=$(grep "(crates/gpuhost-wasm)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
root=$PWD
for t in an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on \
    a_guest_queued_behind_another_guests_kernels_that_fill_the_gpu_is_not_charged_their_time; do
  (cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR=$PWD timeout 120 "$root/.gpu/bin/$bin" --exact "redteam::$t" --nocapture 2>&1) \
    | grep -E "stopped after|test result|panicked" >> "$OUT/logs/redteam.txt"
done
for i in 1 2; do
  timeout 230 .gpu/bin/sandbox_bench --ablate > "$OUT/logs/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/ablate-$i.md"
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/redteam.txt
tar -xzOf "$OUT/logs.tar.gz" logs/ablate-1.md ./logs/ablate-2.md | grep -E 'geometric|rc='
