#!/usr/bin/env bash
# call4.sh and the whole suite in one call, for when machines are scarce (written in session
# 34, when none was lent): branch s33-next's build (packed by bench/h200-runs/next/pack4.sh,
# main's sandbox_bench beside it) through every GPU suite
# (scripts/gpu.sh tests: suites, sandbox-probe, sass-uniform, the branch's sandbox_bench twice),
# with 200 legal and 200 hostile generated programs from seed 8000, and main's sandbox_bench
# before and after it (so each build's two runs bracket the other's); then how many LDS.128
# ptxas keeps in the sandboxed matmul_tiled. Logs into $OUT (gpu.sh packs its own as logs.tar.gz).
# The parallel rerun and the fixtures are skipped (device time is short; only ptxvm changed).
#   device tool: run  command="bash bench/h200-runs/next/call5.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
timeout 60 .gpu/sandbox_bench.main --json "$OUT/main-1.json" > "$OUT/main-1.md" 2>&1
SKIP_PARALLEL=1 SKIP_FIXTURES=1 SANDBOX_GEN_SEED=8000 SANDBOX_GEN_CASES=200 OUT="$OUT/tests" timeout 420 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu.sh tests rc=$?" >> "$OUT/gpu-tests.txt"
timeout 60 .gpu/sandbox_bench.main --json "$OUT/main-2.json" > "$OUT/main-2.md" 2>&1
mkdir -p /tmp/sass && timeout 40 bash scripts/probes/sass-dump.sh /tmp/sass matmul_tiled > "$OUT/sass.txt" 2>&1
echo "LDS.128 in matmul_tiled sandboxed: $(grep -c LDS.128 /tmp/sass/matmul_tiled.sandboxed.sass)" >> "$OUT/sass.txt"
# The nvcc flavour of the corpus (session 35 added mma_gemm.cu, which has only its clang one):
# commit corpus/nvcc/mma_gemm.ptx from this archive.
mkdir -p /tmp/nvcc-corpus && timeout 120 bash scripts/gen-corpus-nvcc.sh /tmp/nvcc-corpus > "$OUT/nvcc-corpus.txt" 2>&1
tar -C /tmp -czf "$OUT/nvcc-corpus.tar.gz" nvcc-corpus
tail -45 "$OUT/gpu-tests.txt"
tail -1 "$OUT/sass.txt"
grep -iE "geometric|worst" "$OUT"/main-*.md
