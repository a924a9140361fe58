#!/usr/bin/env bash
# Run on the GPU machine (it has nvcc; this machine does not): regenerates every fixture that
# needs NVIDIA's compiler and packs them into $OUT/fixtures.tar for committing here.
#   - corpus/nvcc/<name>.ptx        nvcc -arch=sm_90 -ptx of each corpus kernel
#   - crates/gpuhost/bundles/stamp-{a,b}/stamp.sm_90.cubin   cubins of the swap-test bundles
#   - crates/softcuda/tests/fixtures/runtime/scale_add   a CUDA runtime program (cudart linked
#     dynamically; its fatbin holds sm_90 SASS and compute_90 PTX), run once here as a check
# Usage (device tool): bash scripts/gpu-fixtures.sh   → then here: tar xf <files_at>/fixtures.tar
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; "$nvcc" --version | tail -n 2; }
bash scripts/gen-corpus-nvcc.sh corpus/nvcc
b=crates/gpuhost/bundles
"$nvcc" -arch=sm_90 -cubin -O3 -DTAG=0xA0000000u -o $b/stamp-a/stamp.sm_90.cubin $b/stamp.cu
"$nvcc" -arch=sm_90 -cubin -O3 -DTAG=0xB0000000u -o $b/stamp-b/stamp.sm_90.cubin $b/stamp.cu
# The runtime program is optional: a failure here must not lose the fixtures above.
rt=crates/softcuda/tests/fixtures/runtime; mkdir -p $rt; runtime=""
if "$nvcc" -O2 -cudart shared -gencode "arch=compute_90,code=[sm_90,compute_90]" \
     -o $rt/scale_add crates/softcuda/tests/runtime/scale_add.cu; then
  LD_LIBRARY_PATH="$(dirname "$(readlink -f "$nvcc")")/../lib64:${LD_LIBRARY_PATH:-}" "$rt/scale_add" \
    && runtime=$rt/scale_add || echo "runtime scale_add: FAILED on the GPU"
else
  echo "runtime scale_add: nvcc FAILED"
fi
tar cf "$out/fixtures.tar" corpus/nvcc $b/stamp-a/stamp.sm_90.cubin $b/stamp-b/stamp.sm_90.cubin \
  $runtime
echo "fixtures: $(tar tf "$out/fixtures.tar" | wc -l) files"
