#!/usr/bin/env bash
# Where `gpuhost serve`'s threads are when it saturates (issue #11): each target of $TARGETS
# (floor-servers.sh's: native, sandboxed, trusted, ladderN, …) under `oha -c $C` (16), its
# serving process sampled $N times by cuda-gdb (the GPU machine has no perf or gdb; cuda-gdb
# attaches to host programs); a poor man's profiler. Prints, per target, stacks-summary.py's
# profile of the tokio workers: inside libcuda by caller, and the functions on their stacks.
# Needs a gpuhost with a symbol table (objcopy --strip-debug, not strip); carry [".gpu"].
# Env: TARGETS ("sandboxed trusted native"), C (16), N (6), OUT (where the samples go), GPU_DIR
# (a folder laid out as .gpu/, to run it elsewhere).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -n "${GPU_DIR:-}" ] || source scripts/lib/gpu-bin.sh
gpu=${GPU_DIR:-$PWD/.gpu}; c=${C:-16}; n=${N:-6}; out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
source scripts/probes/floor-servers.sh
floor_servers "$work"
for t in ${TARGETS:-sandboxed trusted native}; do
  pid=$serve_pid; [ "$t" = native ] && pid=$native_pid
  "$gpu/bin/oha" --no-tui -z $((n * 4 + 4))s -c "$c" "$(url "$t")" > "$work/oha-$t.txt" 2>&1 &
  load=$!
  sleep 3
  for i in $(seq "$n"); do
    timeout 60 cuda-gdb -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt 40" > "$out/stacks-$t-$i.txt" 2>&1
    sleep 1
  done
  wait $load
  echo "== $t c=$c: $(grep -E 'Requests/sec' "$work/oha-$t.txt" | awk '{print $NF}') req/s (sampled run)"
  python3 scripts/probes/stacks-summary.py "$out"/stacks-$t-*.txt
done
