#!/usr/bin/env bash
# Session 50's fourth call, NOT RUN (02:52 UTC: too little device time was left to start a
# machine): `gpuhost bench` twice at c4a634a, whose staging sweep adds longer copy
# steps (TransferConfig::copy_step_bytes: 256 KiB, 1 MiB, 8 MiB per thread between yields) and 8
# chunks in flight at the default shape. Does waiting less often for a step's slowest copying
# thread close the 15% gap to the plain C pipeline (scripts/probes/staging-ceiling.c)?
# Pack: PACK_SUITES=" " bash scripts/gpu-pack.sh; device tool: run, carry [".gpu"].
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
for i in 1 2; do
  timeout 60 .gpu/bin/gpuhost bench --json "$OUT/logs/bench-$i.json" > "$OUT/logs/bench-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/bench-$i.md"
done
gpu_call_end
cat "$OUT/machine.txt"
for i in 1 2; do
  echo "== run $i"
  tar -xzOf "$OUT/logs.tar.gz" "logs/bench-$i.md" | grep -E '64 MiB \| .* pageable|Pageable staging|^\| 8 MiB \| (4|8) \| 12 \| cached|rc='
done
