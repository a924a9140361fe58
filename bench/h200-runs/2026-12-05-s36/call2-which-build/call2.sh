#!/usr/bin/env bash
# s36 call 2: which build gives NVIDIA's JIT the wrong answers of generated seeds 8100 and 5682.
set -u
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
xz -dc .gpu/main-conf.xz > /tmp/main-conf && chmod +x /tmp/main-conf
br=$PWD/.gpu/bin/all-b33bb7d70b1decf3
cd crates/conformance
export SANDBOX_GEN_REDUCE_S=60
SANDBOX_GEN_REDUCE=1 SANDBOX_GEN_SEED=8000 SANDBOX_GEN_CASES=200 timeout 200 /tmp/main-conf generated::legal_programs_nvidia generated::generated_programs_give --test-threads=1 > $OUT/main-gen8.txt 2>&1
echo "main seeds 8000+200 and miscompiled: rc=$?" | tee -a $OUT/summary.txt
SANDBOX_GEN_SEED=9000 SANDBOX_GEN_CASES=400 timeout 100 /tmp/main-conf generated::generated_programs_give --test-threads=1 > $OUT/main-gen9.txt 2>&1
echo "main seeds 9000+400: rc=$?" | tee -a $OUT/summary.txt
SANDBOX_GEN_SEED=9000 SANDBOX_GEN_CASES=400 timeout 100 $br generated::generated_programs_give --test-threads=1 > $OUT/br-gen9.txt 2>&1
echo "branch seeds 9000+400: rc=$?" | tee -a $OUT/summary.txt
SANDBOX_GEN_REDUCE=1 SANDBOX_GEN_SEEDS=8100,5682 timeout 200 $br generated::generated_programs_give --test-threads=1 > $OUT/br-red.txt 2>&1
echo "branch 8100,5682 reduce: rc=$?" | tee -a $OUT/summary.txt
grep -hE "programs failed|programs passed|^seed [0-9]+:" $OUT/*.txt | cut -c1-300
