#!/usr/bin/env bash
# Runs one gpuhost-wasm test again and again, alone, until it hangs or N runs pass; a hung run gets
# every thread's state and cuda-gdb backtrace (probes/hang-diag.sh). For the rare hang of the
# red-team flood test on NVIDIA (issue #12, sessions 9 and 10).
# On the GPU machine, carry [".gpu"]:  N=40 GRACE=25 bash scripts/probes/flood-loop.sh [TEST]
set -uo pipefail
cd "$(dirname "$0")/../.."
t=${1:-redteam::flooding_launches_then_dropping_the_stream_keeps_them_counted_until_they_end}
out="${OUT:-/tmp/out}/flood-loop"; mkdir -p "$out"
for i in $(seq "${N:-40}"); do
  if OUT="$out/run-$i" bash scripts/probes/hang-diag.sh "$t" | grep -q '^HUNG'; then
    echo "run $i of $t: hung (logs in flood-loop/run-$i)" | tee -a "$out/summary.txt"
    exit 1
  fi
  rm -rf "$out/run-$i"
done
echo "$t: ${N:-40} runs, none hung" | tee -a "$out/summary.txt"
