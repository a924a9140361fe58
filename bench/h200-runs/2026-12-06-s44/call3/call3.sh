#!/usr/bin/env bash
# Session 44's third call (~4 min), at the commit packed (the start count tests %tid.x | %ctaid.x
# only): sandbox_bench --ablate over every corpus kernel twice (the count's cost: "no start
# count" beside the rewrite, graph-replayed geometric means), the red team's endless-kernel and
# queued-guest tests, then issue #12's benchmarks twice each (gpuhost bench, bench --guest).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call3/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_suites_ready
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
for i in 1 2; do
  timeout 120 .gpu/bin/sandbox_bench --ablate > "$OUT/logs/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/ablate-$i.md"
done
bin=$(grep "(crates/gpuhost-wasm)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
root=$PWD
for t in an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on \
    a_guest_queued_behind_another_guests_kernels_that_fill_the_gpu_is_not_charged_their_time; do
  (cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR=$PWD timeout 120 "$root/.gpu/bin/$bin" --exact "redteam::$t" --nocapture 2>&1) \
    | grep -E "stopped after|test result|panicked" >> "$OUT/logs/redteam.txt"
done
for i in 1 2; do
  timeout 140 .gpu/bin/gpuhost bench --json "$OUT/logs/bench-$i.json" > "$OUT/logs/bench-$i.md" 2>&1
  echo "bench $i rc=$?" >> "$OUT/logs/bench-$i.md"
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/redteam.txt
tar -xzOf "$OUT/logs.tar.gz" logs/ablate-1.md logs/ablate-2.md | grep -E 'geometric|rc='
tar -xzOf "$OUT/logs.tar.gz" logs/bench-guest-1.md logs/bench-guest-2.md | grep -E 'alone|graph-batched|rc=' | head -24
