#!/usr/bin/env bash
# Session 44's sixth call (~3 min), at the commit packed (the final code): issue #11's serve
# benchmark twice (scripts/bench-serve.sh, 3 s rounds; sandboxed guests now count their launches'
# starts), and issue #12's guest benchmark once more.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call6/call6.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so" GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
mkdir -p "$OUT/logs"
for i in 1 2; do
  OUT="$OUT/logs/s$i" BENCH_SECS=3 timeout 80 bash scripts/bench-serve.sh > "$OUT/logs/serve-$i.md" 2>&1
  echo "serve bench $i rc=$?" >> "$OUT/logs/serve-$i.md"
done
timeout 90 .gpu/bin/gpuhost bench --guest --json "$OUT/logs/bench-guest-3.json" > "$OUT/logs/bench-guest-3.md" 2>&1
echo "guest bench rc=$?" >> "$OUT/logs/bench-guest-3.md"
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/serve-1.md logs/serve-2.md | grep -E '^\||rc=' | head -40
tar -xzOf "$OUT/logs.tar.gz" logs/bench-guest-3.md | grep -E 'alone on an idle|graph-batched|rc=' | head -12
