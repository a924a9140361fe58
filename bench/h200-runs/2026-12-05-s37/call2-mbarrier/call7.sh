#!/usr/bin/env bash
# Session 37's second call: two questions, each short, and two mended tests.
# 1. Which mbarrier operation on which shared word poisons the context (call 1's mbarrier_words
#    ran them all in one kernel and lost the context): scripts/probes/mbarrier-probe.cu, one
#    forked process per case.
# 2. Where mma_gemm_f16_smem's sandbox cost is (nvcc's build replayed 1.22x native on the H100
#    in call 1): sandbox_bench --ablate on the tensor-core kernels and the other slowest ones,
#    twice, with session 37's "no shared fences" and "no fences" columns.
# 3. The mended tests: conformance's mbarrier_words (now: the launch faults and the context is
#    lost, on every driver; ptxvm faults there too) and the ptxvm-reference test over seeds
#    8000..8199 (without seed 8100, which NVIDIA compiles wrong as written).
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call7.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt"
export SANDBOX_BENCH_KERNELS=mma_gemm_f16_smem,mma_gemm_f16,mma_gemm_wmma,mma_gemm_wmma_s8,mma_gemm_wmma_bf16,mma_gemm_s8,reduce_f64_dynamic,softmax_rows,histogram,transpose
for i in 1 2; do
  timeout 150 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/ablate-$i.md"
done
nvcc -O2 -o /tmp/mbarrier-probe scripts/probes/mbarrier-probe.cu -lcuda > "$OUT/mbarrier-probe.md" 2>&1
timeout 150 /tmp/mbarrier-probe >> "$OUT/mbarrier-probe.md" 2>&1
echo "mbarrier-probe rc=$?" >> "$OUT/mbarrier-probe.md"
gpu_suites_ready
SANDBOX_GEN_SEED=8000 SANDBOX_GEN_CASES=200 timeout 120 bash .gpu/run.sh \
  mbarrier_words generated::ptxvms_reference > "$OUT/mended.txt" 2>&1
echo "rc=$?" >> "$OUT/mended.txt"
cat "$OUT/machine.txt"
grep -E "^test |test result|rc=" "$OUT/mended.txt"
cat "$OUT/mbarrier-probe.md"
for i in 1 2; do grep -A14 "graph µs: native" "$OUT/ablate-$i.md"; done
