#!/usr/bin/env bash
# Session 43's third call (~2 min): which of e995bc1's two changes moved mbarrier_pipeline
# (call 2: 11.6 us graph-replayed, against 10.7-10.9 at 0c9ffc3 in call 1): sandbox_bench
# --ablate on it with each of variants/ (README there) as the "from file" column, twice.
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call3/call3.sh"  carry=[".gpu"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
mkdir -p "$OUT/c3"
for i in 1 2; do
  for v in at-0c9ffc3 at-913d4ba nomatch nopolls; do
    SANDBOX_BENCH_KERNELS=mbarrier_pipeline SANDBOX_BENCH_FILE="mbarrier_pipeline=$here/variants/$v.ptx" \
      timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/c3/$v-$i.md" 2>&1
    echo "rc=$?" >> "$OUT/c3/$v-$i.md"
  done
done
tar -C "$OUT" -czf "$OUT/call3.tar.gz" c3
for f in "$OUT"/c3/*.md; do
  echo "$(basename "$f" .md): $(grep -E '^\| mbarrier_pipeline \| [0-9]' "$f" | tail -1)"
done
