#!/usr/bin/env bash
# Session 44's second call (~6 min): what counting each launch's start costs the sandboxed
# kernels (sandbox_bench --ablate over every corpus kernel, twice: the "no start count" column
# beside the rewrite, graph-replayed, and the geometric-mean row), then issue #12's guest
# launch benchmarks twice (the hidden launch word and the watch's count changed).
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
for i in 1 2; do
  timeout 170 .gpu/bin/sandbox_bench --ablate > "$OUT/logs/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/logs/ablate-$i.md"
done
for i in 1 2; do
  timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-$i.json" > "$OUT/logs/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$OUT/logs/bench-guest-$i.md"
done
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" ./logs/ablate-1.md ./logs/ablate-2.md | grep -E 'geometric|rc='
tar -xzOf "$OUT/logs.tar.gz" ./logs/bench-guest-1.md ./logs/bench-guest-2.md | grep -E 'alone|burst|rc=' | head -20
