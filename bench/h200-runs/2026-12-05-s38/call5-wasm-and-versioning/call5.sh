#!/usr/bin/env bash
# Session 38's last GPU call, at 299e55c (the pack of call 4): gpuhost-wasm's suite, which
# call 4's one limit for all suites cut off (conformance ran long with 200 generated
# programs of each kind; scripts/gpu.sh now scales the limit), then the sandbox bench with
# loop versioning off beside on, for all 31 kernels: what count-down versioning changed.
#   device tool: run  command="bash bench/h200-runs/next/call5.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
export GPUHOST_GUEST_DIR="$PWD/.gpu/guests"   # prebuilt guests, as scripts/gpu.sh sets
gpu_suites_ready
(cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR="$PWD" timeout 150 ../../.gpu/bin/all-6de7e5f773c3da46 \
  --include-ignored --test-threads=1 --skip the_status_page_shows --skip with_two_devices_a_function \
  --skip context_loss::foreign_resets_during_transfers) > "$OUT/wasm-tests.txt" 2>&1
echo "rc=$?" >> "$OUT/wasm-tests.txt"
[ -n "${SKIP_BENCH:-}" ] || timeout 100 .gpu/bin/sandbox_bench --without version > "$OUT/without-version.md" 2>&1
echo "rc=$?" >> "$OUT/without-version.md"
grep -E "test result|FAILED|rc=" "$OUT/wasm-tests.txt"
grep -E "geometric|graph-replayed|rc=" "$OUT/without-version.md"
