#!/usr/bin/env bash
# Session 43's first call (~3 min): session 42's waiting call (the sandboxed mbarrier arrival as
# 32-bit atomic adds, 9e4ab62 + 167ef86: conformance's mbarrier cases and every corpus kernel
# through the sandbox on seed 43001, then sandbox_bench twice on mbarrier_pipeline beside four
# kernels), then sandbox_bench --ablate on mbarrier_pipeline with each of variants/ as its
# "from file" column: what if-conversion's registers and the arrival's cp.async.wait_all cost.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call1/call1.sh"  carry=[".gpu"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
final=$OUT; export OUT=$final/c1; mkdir -p "$OUT"
SEED=43001 bash bench/h200-runs/2026-12-06-s42/call3/call3.sh > "$OUT/call3-summary.txt" 2>&1
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
for v in noifconv nowaitall both; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline SANDBOX_BENCH_FILE="mbarrier_pipeline=$here/variants/$v.ptx" \
    timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate-$v.md" 2>&1
  echo "rc=$?" >> "$OUT/ablate-$v.md"
done
tar -C "$final" -czf "$final/call1.tar.gz" c1
cat "$OUT/call3-summary.txt"
for v in noifconv nowaitall both; do echo "== $v"; grep -E '^\| (mbarrier_pipeline|kernel)|rc=' "$OUT/ablate-$v.md"; done
