#!/usr/bin/env bash
# Session 43's fourth call (~1 min): which loops' polls cost mbarrier_pipeline 1.3 us (call 3's
# nopolls): 913d4ba's rewrite (call3/variants/at-913d4ba.ptx) with the polls of its spin-wait
# loops, its tile loops, or its inner loops taken out (variants/, made by variants/make.py),
# each as sandbox_bench's "from file" column, twice.
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call4/call4.sh"  carry=[".gpu"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
mkdir -p "$OUT/c4"
cp "$here/../call3/variants/at-913d4ba.ptx" "$here/variants/" 2>/dev/null
for i in 1 2; do
  for v in at-913d4ba nopoll-spin nopoll-tile nopoll-inner nopoll-all; do
    SANDBOX_BENCH_KERNELS=mbarrier_pipeline SANDBOX_BENCH_FILE="mbarrier_pipeline=$here/variants/$v.ptx" \
      timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/c4/$v-$i.md" 2>&1
    echo "rc=$?" >> "$OUT/c4/$v-$i.md"
  done
done
tar -C "$OUT" -czf "$OUT/call4.tar.gz" c4 && rm -rf "$OUT/c4"/*.md
tar -xzf "$OUT/call4.tar.gz" -C /tmp
for f in /tmp/c4/*.md; do
  echo "$(basename "$f" .md): $(grep -E '^\| mbarrier_pipeline \| [0-9]' "$f" | tail -1 | awk -F'|' '{print "native", $3, "sandboxed", $4, "from file", $(NF-1)}')"
done
