#!/usr/bin/env bash
# On the GPU machine: runs named gpuhost-wasm tests one at a time and, for any still running after
# a grace period, dumps every thread's state and host backtrace (cuda-gdb attaches; the image has
# no gdb), then kills it. Usage: bash scripts/probes/hang-diag.sh TEST_NAME...  (logs to $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests" RUST_BACKTRACE=1
bin=$(grep 'gpuhost-wasm' .gpu/run.sh | grep -o 'all-[0-9a-f]*' | head -1)
cd crates/gpuhost-wasm; export CARGO_MANIFEST_DIR="$PWD"
for t in "$@"; do
  log="$out/${t//:/_}.log"
  stdbuf -o0 -e0 "../../.gpu/bin/$bin" --exact "$t" --nocapture --test-threads=1 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 ${GRACE:-15}); do sleep 1; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "HUNG $t" | tee -a "$log"
    nvidia-smi --query-gpu=utilization.gpu --format=csv >> "$log" 2>&1
    for task in /proc/$pid/task/*; do
      echo "$(cat $task/comm) state=$(awk '{print $3}' $task/stat) wchan=$(cat $task/wchan)" >> "$log"
    done
    timeout 90 cuda-gdb -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 30" >> "$log" 2>&1
    kill -9 $pid; wait $pid 2>/dev/null
  else
    wait $pid; echo "DONE $t rc=$?" | tee -a "$log"
  fi
done
