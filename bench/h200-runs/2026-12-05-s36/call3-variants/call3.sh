#!/usr/bin/env bash
# s36 call 3: hand-edited rewrites of generated seed 8100's reduced program against it as written,
# with the driver's JIT cache kept (CUDA_CACHE_PATH) to read the SASS it ran, and the toolkit's
# ptxas SASS of the base variant to compare with this machine's.
set -u
export GPUHOST_DRIVER=nvidia CUDA_CACHE_PATH=/tmp/jitcache CUDA_CACHE_MAXSIZE=1073741824
root=$PWD
xz -dc .gpu/main-conf.xz > /tmp/main-conf && chmod +x /tmp/main-conf
cd crates/conformance
SANDBOX_GEN_PROGRAM=$root/.gpu/s36/red.ptx SANDBOX_GEN_VARIANTS=$root/.gpu/s36/var SANDBOX_GEN_SEEDS=8100 timeout 150 /tmp/main-conf generated::generated_programs_give --test-threads=1 > $OUT/var.txt 2>&1
echo "rc=$?"
cd $root
P=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1); echo "ptxas: $P $($P --version | tail -1)"

tar -C /tmp -czf $OUT/jit.tar.gz jitcache 2>/dev/null
grep -o "variant [^;]*" $OUT/var.txt | cut -c1-220
