#!/usr/bin/env bash
# Session 51's first call (session 50's call4, packed and never run), run at 05:15 UTC on an NVIDIA H100 (asked for an H200), pack at b8d26a7:
# `gpuhost bench` twice at the session's first commit, whose staging sweep (since c4a634a) adds longer copy
# steps (TransferConfig::copy_step_bytes: 256 KiB, 1 MiB, 8 MiB per thread between yields) and 8
# chunks in flight at the default shape. Does waiting less often for a step's slowest copying
# thread close the 15% gap to the plain C pipeline (scripts/probes/staging-ceiling.c)? The
# sweep's rows also say, per direction, the host copy's rate inside the pipeline and the shares of
# wall time spent copying and awaiting DMAs (HostStats' staging counters, new in this session).
# Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh; device tool: run, carry [".gpu"].
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
# Run 1, the C pipeline, then run 2: a call cut short by the lease still brings back the first
# two (each log is written under $OUT as it goes).
bench() {
  timeout 60 .gpu/bin/gpuhost bench --json "$OUT/logs/bench-$1.json" > "$OUT/logs/bench-$1.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/bench-$1.md"
}
bench 1
# The plain C pipeline on the same machine, the ceiling the sweep is held against.
cc -O2 -pthread -I/usr/local/cuda/include scripts/probes/staging-ceiling.c -L/usr/local/nvidia/lib64 \
  -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/sc > "$OUT/logs/staging.txt" 2>&1 && timeout 60 /tmp/sc >> "$OUT/logs/staging.txt" 2>&1
echo "rc=$?" >> "$OUT/logs/staging.txt"
bench 2
gpu_call_end
cat "$OUT/machine.txt"
for i in 1 2; do
  echo "== run $i"
  tar -xzOf "$OUT/logs.tar.gz" "logs/bench-$i.md" | grep -E '64 MiB \| .* pageable|Pageable staging|^\| 8 MiB \| (4|8) \| 12 \| cached|rc='
done
tar -xzOf "$OUT/logs.tar.gz" logs/staging.txt | head -24
