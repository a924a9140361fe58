#!/usr/bin/env bash
# Session 37's third call: call 7's second question again. Its "no shared fences" edit took
# the predicate off each shared access, which if-conversion had folded the user's guard into,
# so transpose's guarded stores ran unguarded and faulted (ablate-1.md there). The edit now
# makes each window check's compare independent of the address instead, keeping the guard.
# sandbox_bench --ablate on the five slowest kernels (of call 1), twice. Then
# conformance's mbarrier_words, with its new over-arrival test (call 7's probe: an arrive of 3
# on a barrier expecting 1 lost the context), on NVIDIA.
#   here:        bash scripts/gpu-pack.sh
#   device tool: run  command="bash bench/h200-runs/next/call8.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/machine.txt"
export SANDBOX_BENCH_KERNELS=mma_gemm_f16_smem,mma_gemm_wmma_s8,reduce_f64_dynamic,softmax_rows,transpose
for i in 1 2; do
  timeout 60 .gpu/bin/sandbox_bench --ablate > "$OUT/ablate-$i.md" 2>&1
  echo "rc=$?" >> "$OUT/ablate-$i.md"
done
gpu_suites_ready
timeout 60 bash .gpu/run.sh mbarrier_words > "$OUT/mbarrier-tests.txt" 2>&1
echo "rc=$?" >> "$OUT/mbarrier-tests.txt"
cat "$OUT/machine.txt"
grep -E "^test |test result|rc=|differ|got" "$OUT/mbarrier-tests.txt"
for i in 1 2; do grep -v "in drop failed" "$OUT/ablate-$i.md" | grep -A14 "graph µs: native"; tail -2 "$OUT/ablate-$i.md"; done
