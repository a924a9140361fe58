#!/usr/bin/env bash
# Session 44's fifth call (~8 min), at the commit packed (a skip copy that never polls counts no
# start): every suite on NVIDIA, both ways, with sandbox_bench twice (scripts/gpu.sh tests);
# sandbox_bench --ablate twice ("no start count" beside the rewrite, graph-replayed geometric
# means); and the red team's endless-kernel test, printing how long each runaway launch took to
# be stopped against its 300 ms limit.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call5/call5.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
final=$OUT
OUT=$final/tests SKIP_FIXTURES=1 SKIP_PROBE=1 bash scripts/gpu.sh tests > "$final/tests-summary.txt" 2>&1
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests" SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
mkdir -p "$final/logs"
for i in 1 2; do
  timeout 60 .gpu/bin/sandbox_bench --ablate > "$final/logs/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$final/logs/ablate-$i.md"
done
bin=$(grep "(crates/gpuhost-wasm)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
root=$PWD
(cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR=$PWD timeout 60 "$root/.gpu/bin/$bin" --exact \
  redteam::an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on --nocapture 2>&1) \
  | grep -E "stopped after|test result" > "$final/logs/endless.txt"
tar -C "$final" -czf "$final/logs.tar.gz" logs && rm -rf "$final/logs"
tail -32 "$final/tests-summary.txt"
tar -xzOf "$final/tests/logs.tar.gz" ./sandbox-1.md ./sandbox-2.md | grep -E 'geometric|graph-replayed'
tar -xzOf "$final/logs.tar.gz" logs/ablate-1.md logs/ablate-2.md | grep -E '^\| geometric|rc='
tar -xzOf "$final/logs.tar.gz" logs/endless.txt
