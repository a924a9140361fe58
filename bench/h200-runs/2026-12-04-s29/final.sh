# s29 last device call, at the merged helpers' work (rewrite speed; guest launch argument lists):
# gpuhost-wasm's suite on NVIDIA, `gpuhost bench --guest` twice, the rewrite's time on this
# machine's CPU twice, and the serve bench once. Logs as one archive (logs.tar.gz).
set -u
out="$OUT/final"; mkdir -p "$out"
source scripts/lib/gpu-bin.sh; gpu_suites_ready
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR=$PWD/.gpu/guests SOFTCUDA_LIB=$PWD/.gpu/lib/libsoftcuda.so
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; echo "commit $(cat .gpu/COMMIT | tr '\n' ' ')"; date -u; } > "$out/machine.txt"
w=$(grep "(crates/gpuhost-wasm)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/gpuhost-wasm && CARGO_MANIFEST_DIR=$PWD timeout 90 ../../.gpu/bin/$w --include-ignored --test-threads=1) > "$out/wasm-tests.log" 2>&1
echo "wasm tests rc=$?" >> "$out/wasm-tests.log"
for i in 1 2; do
  timeout 100 .gpu/bin/gpuhost bench --guest --json "$out/bench-guest-$i.json" > "$out/bench-guest-$i.md" 2>&1
  echo "guest bench $i rc=$?" >> "$out/bench-guest-$i.md"
  timeout 30 .gpu/bin/rewrite_time corpus/clang corpus/nvcc crates/ptxvm/tests/fixtures > "$out/rewrite-time-$i.txt" 2>&1
done
BENCH_SECS=3 OUT="$out" timeout 75 bash scripts/bench-serve.sh > "$out/serve-bench.md" 2>&1
echo "serve bench rc=$?" >> "$out/serve-bench.md"
tar -czf "$OUT/logs.tar.gz" -C "$out" . && rm -rf "$out"
