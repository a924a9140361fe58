#!/usr/bin/env bash
# Session 43's second call (~6 min): every suite on NVIDIA's driver at the commit packed (the
# nested loops' charge and the warp-aggregated mbarrier arrival), sandbox_bench twice over
# every corpus kernel (scripts/gpu.sh tests), then sandbox_bench --ablate on mbarrier_pipeline
# twice, the second with the arrival's cp.async.wait_all taken out (variants/, timing only).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call2/call2.sh"  carry=[".gpu"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
final=$OUT
OUT=$final/tests SKIP_FIXTURES=1 SKIP_PROBE=1 bash scripts/gpu.sh tests > "$final/tests-summary.txt" 2>&1
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
mkdir -p "$final/ablate"
for i in 1 2; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline SANDBOX_BENCH_FILE="mbarrier_pipeline=$here/variants/nowaitall.ptx" \
    timeout 60 .gpu/bin/sandbox_bench --ablate > "$final/ablate/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$final/ablate/ablate-$i.md"
done
tar -C "$final" -czf "$final/ablate.tar.gz" ablate && rm -rf "$final/ablate"
tail -45 "$final/tests-summary.txt"
tar -xzOf "$final/ablate.tar.gz" ./ablate/ablate-1.md ./ablate/ablate-2.md 2>/dev/null | grep -E '^\| (mbarrier|kernel)|rc='
