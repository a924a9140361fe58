#!/usr/bin/env bash
# Session 51's second call (~40 s): is the upload's gap to the plain C pipeline the staging
# memory? gpuhost stages through heap memory registered with cuMemHostRegister (pinned.rs); the C
# pipeline's ring came from cuMemHostAlloc. scripts/probes/staging-ceiling.c with each kind of
# ring (STAGING=alloc, register, huge, nohuge: transparent huge pages asked for or refused), at a
# few shapes (SHAPES=few), each row with its host copy's rate while the DMAs run (call1 measured
# gpuhost's at 65.8-69.2 GB/s up). Then `gpuhost bench` once, whose sweep rows now count the
# memory page-locked during their rounds: did call1's 8-in-flight rows (0.43-0.50x up, measured
# last) register staging inside their rounds? NOT RUN in session 51 (too little device time
# left after call1); run in session 52 as the first part of bench/h200-runs/2026-12-07-s52/call1. Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh; device tool run, carry [".gpu"].
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
{ cat /sys/kernel/mm/transparent_hugepage/enabled; lscpu | grep -iE 'numa|model name|socket'; } > "$OUT/logs/host.txt" 2>&1
cc -O2 -pthread -I/usr/local/cuda/include scripts/probes/staging-ceiling.c -L/usr/local/nvidia/lib64 \
  -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/sc > "$OUT/logs/build.txt" 2>&1
for st in alloc register huge nohuge alloc register; do
  STAGING=$st SHAPES=few timeout 30 /tmp/sc >> "$OUT/logs/staging-$st.txt" 2>&1
  echo "rc=$?" >> "$OUT/logs/staging-$st.txt"
done
timeout 60 .gpu/bin/gpuhost bench --json "$OUT/logs/bench.json" > "$OUT/logs/bench.md" 2>&1
echo "rc=$?" >> "$OUT/logs/bench.md"
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/host.txt logs/build.txt
for st in alloc register huge nohuge; do
  echo "== $st"; tar -xzOf "$OUT/logs.tar.gz" "logs/staging-$st.txt" | grep -E '^\| (up|down)|rc=|raw pinned'
done
tar -xzOf "$OUT/logs.tar.gz" logs/bench.md | grep -E 'Pageable staging|^\| 8 MiB \| (4|8) \| 12 \| cached|rc='
