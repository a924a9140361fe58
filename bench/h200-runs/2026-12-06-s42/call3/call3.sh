#!/usr/bin/env bash
# Session 42's third call (~3 min): the sandboxed mbarrier arrival as atomic adds (c9bacfd) on
# the H200: conformance's mbarrier cases and every corpus kernel through the sandbox (generated
# programs from seed 42001, 60 legal and 60 hostile), then sandbox_bench twice on
# mbarrier_pipeline beside the kernels call 1 timed.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s42/call3/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(tr '\n' ' ' < .gpu/COMMIT)"; date -u; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
gpu_suites_ready
SANDBOX_GEN_SEED=${SEED:-42001} SANDBOX_GEN_CASES=60 timeout 120 bash .gpu/run.sh mbarrier \
  every_corpus_kernel_gives_its_reference_answer > "$OUT/tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/tests.log"
for i in 1 2; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline,saxpy,softmax_rows,transpose,mma_gemm_wmma_tf32 \
    timeout 40 .gpu/bin/sandbox_bench --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "sandbox_bench rc=$?" >> "$OUT/sandbox-$i.md"
done
grep -E '^== |^test result|FAILED|panicked|rc=' "$OUT/tests.log" | head -20
grep -cE '^test .*mbarrier.* ok$' "$OUT/tests.log"
grep -hE 'mbarrier_pipeline|geometric|rc=' "$OUT"/sandbox-*.md
