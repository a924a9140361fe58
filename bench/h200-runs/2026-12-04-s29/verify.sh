# s29 device calls: the suites (gpu.sh tests: sandbox-probe, sandbox_bench twice), generated
# programs from seed $SEED (legal and hostile, on NVIDIA's JIT), and the SASS of the kernels whose
# graph-replayed overhead is largest (sass.tar.gz). Call 1 ran it as call1.sh (seed 2000).
set -u
t0=$(date +%s)
SKIP_FIXTURES=1 SKIP_PARALLEL=1 timeout 330 bash scripts/gpu.sh tests > "$OUT/gpu-tests.txt" 2>&1
echo "tests rc=$? in $(( $(date +%s) - t0 )) s" >> "$OUT/gpu-tests.txt"
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
mkdir -p /tmp/sass
bash scripts/probes/sass-dump.sh /tmp/sass matmul_tiled transpose softmax_rows histogram > "$OUT/sass.txt" 2>&1
for k in matmul_tiled transpose; do python3 scripts/probes/sass-loops.py "/tmp/sass/$k.sandboxed.sass" >> "$OUT/sass.txt"; done
echo "LDS.128 in matmul_tiled sandboxed: $(grep -c LDS.128 /tmp/sass/matmul_tiled.sandboxed.sass)" >> "$OUT/sass.txt"
tar -C /tmp -czf "$OUT/sass.tar.gz" sass
bin=$(grep "(crates/conformance)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
left=$(( 560 - ($(date +%s) - t0) ))
(cd crates/conformance && CARGO_MANIFEST_DIR=$PWD SANDBOX_GEN_SEED=${SEED:-3000} SANDBOX_GEN_CASES=${CASES:-500} \
  timeout $left ../../.gpu/bin/$bin generated:: --test-threads=2) > "$OUT/generated.log" 2>&1
echo "generated seed ${SEED:-3000} rc=$?" >> "$OUT/generated.log"
tail -45 "$OUT/gpu-tests.txt" | grep -E "test result|rc=|passed|failed|geometric|worst|FAIL"
cat "$OUT/sass.txt"
grep -E "test result|of [0-9]+ |rc=" "$OUT/generated.log" | head
