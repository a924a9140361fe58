#!/usr/bin/env bash
# Runs one test of a packed suite under cuda-gdb until it crashes (at most N times), on the GPU
# machine (carry [".gpu"]; it has no plain gdb): a crash's every thread's backtrace is printed.
# The packed binaries are stripped: name the frames here with scripts/lib/symbolize.py.
#   bash scripts/probes/crash-bt.sh gpuhost context_loss::foreign_resets_during_transfers 5 > bt.log
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
crate=${1:?crate folder under crates/}; test=${2:?a test name (substring)}; rounds=${3:-5}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia} GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
bin=$(grep "(crates/$crate)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
[ -n "$bin" ] || { echo "no packed suite for crates/$crate in .gpu/run.sh"; exit 2; }
root=$PWD; dir="$root/crates/$crate"
for r in $(seq "$rounds"); do
  log=$(cd "$dir" && CARGO_MANIFEST_DIR="$dir" timeout 120 cuda-gdb -batch -ex "set pagination off" \
    -ex run -ex "info registers rip" -ex "thread apply all bt 40" \
    --args "$root/.gpu/bin/$bin" "$test" --test-threads=1 2>&1)
  if echo "$log" | grep -q "received signal"; then
    echo "round $r: crashed"; echo "$log" | grep -v '^\[New Thread\|^\[Thread .* exited\|^warning: ' | head -c 300000
    exit 1
  fi
  echo "round $r: $(echo "$log" | grep -E '^test result' | head -1)"
done
echo "no crash in $rounds rounds"
