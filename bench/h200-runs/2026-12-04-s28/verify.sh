# s28 device call 5: the suites with the loop-leaving poll (gpu.sh tests), then more generated
# programs (legal and hostile) from seed 1000 than CI's, on NVIDIA's JIT.
SKIP_FIXTURES=1 SKIP_PARALLEL=1 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
bin=$(grep "(crates/conformance)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/conformance && CARGO_MANIFEST_DIR=$PWD SANDBOX_GEN_SEED=1000 SANDBOX_GEN_CASES=${CASES:-600} \
  timeout 200 ../../.gpu/bin/$bin generated:: --test-threads=2) > "$OUT/generated-1000.log" 2>&1
echo "generated rc=$?" >> "$OUT/generated-1000.log"
cat "$OUT/gpu-tests.txt" | tail -40
grep -E "^test |test result|of [0-9]+ |rc=" "$OUT/generated-1000.log" | head
