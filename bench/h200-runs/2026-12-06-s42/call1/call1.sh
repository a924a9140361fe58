#!/usr/bin/env bash
# Session 42's one GPU call (~7 min; six starts had failed and spent half the device time, so
# everything goes in one, each benchmark once):
# 1. the rewrite's time on the GPU machine's CPU (issue #9's goal), twice;
# 2. the packed suites filtered to what has not met NVIDIA's driver yet: session 40's
#    mbarrier cases (mbarrier_sandboxed, the generated programs with mbarrier, seed 42000, 60
#    legal and 60 hostile), session 41's mbarrier_pipeline (native and every corpus kernel
#    through the sandbox), and session 42's launch-limit test and conformance step (a block
#    over a kernel's .maxntid);
# 3. sandbox_bench twice on mbarrier_pipeline and the worst graph-replayed kernels;
# 4. serve with and without scripts/patches/wasmtime-48.0.8.patch side by side
#    (scripts/probes/serve-ab.sh: A = the packed gpuhost, B = the same commit with the patch);
# 5. `gpuhost bench` and `gpuhost bench --guest` (issue #12), once each.
# Build here first (.gpu and the tree together must stay under the device tool's 64 MiB: move
# .gpu/perf.tar.xz and .gpu/sandbox aside):
#   bash scripts/gpu-pack.sh
#   git worktree add --detach ../wt-serve HEAD && bash scripts/patches/wasmtime-patched.sh ../wt-serve/vendor
#   (add the [patch.crates-io] lines it prints to ../wt-serve/Cargo.toml; cargo update -p
#   wasmtime --offline; cargo build --release -p gpuhost-cli --bin gpuhost there; strip
#   --strip-debug -o .gpu/ab/gpuhost-patched ITS_TARGET/release/gpuhost; xz .gpu/ab/*)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s42/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
logs=/tmp/s42-logs; rm -rf "$logs"; mkdir -p "$logs"
# The logs go back as one archive, packed after every step: a call stopped at its limit still
# brings back what ran (the device tool returns at most 8 files).
pack() { tar -czf "$OUT/logs.tar.gz" -C "$logs" .; }
for f in .gpu/ab/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(tr '\n' ' ' < .gpu/COMMIT); serve B: the same with wasmtime-48.0.8.patch"
  date -u; nproc; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
for i in 1 2; do
  timeout 30 .gpu/bin/rewrite_time corpus/nvcc > "$logs/rewrite-time-$i.md" 2>&1
  echo "rewrite_time rc=$?" >> "$logs/rewrite-time-$i.md"
done
pack
gpu_suites_ready
SANDBOX_GEN_SEED=42000 SANDBOX_GEN_CASES=60 timeout 150 bash .gpu/run.sh mbarrier \
  every_corpus_kernel_gives_its_reference_answer launches_beyond_a_kernels_own_limits \
  library > "$OUT/tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/tests.log"
for i in 1 2; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline,saxpy,softmax_rows,transpose,mma_gemm_wmma_tf32 \
    timeout 30 .gpu/bin/sandbox_bench --json "$logs/sandbox-$i.json" > "$logs/sandbox-$i.md" 2>&1
  echo "sandbox_bench rc=$?" >> "$logs/sandbox-$i.md"
done
pack
OHA=.gpu/bin/oha GUESTS=.gpu/guests SECS=2 ROUNDS=2 CS="16 64" \
  timeout 80 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/ab/gpuhost-patched > "$OUT/serve-ab.txt" 2>&1
echo "serve-ab rc=$?" >> "$OUT/serve-ab.txt"
i=1
timeout 70 .gpu/bin/gpuhost bench --guest --json "$logs/bench-guest-$i.json" > "$logs/bench-guest-$i.md" 2>&1
echo "guest bench $i rc=$?" >> "$logs/bench-guest-$i.md"
pack
timeout 100 .gpu/bin/gpuhost bench --json "$logs/bench-$i.json" > "$logs/bench-$i.md" 2>&1
echo "bench $i rc=$?" >> "$logs/bench-$i.md"
pack && rm -rf "$logs"
echo "== rewrite time"; tar -xzOf "$OUT/logs.tar.gz" ./rewrite-time-1.md ./rewrite-time-2.md | grep -E '^all|rc='
echo "== tests"; grep -E '^== |^test result|FAILED|panicked|rc=' "$OUT/tests.log" | head -30
grep -cE '^test .*mbarrier.* ok$' "$OUT/tests.log"
echo "== sandbox"; tar -xzOf "$OUT/logs.tar.gz" ./sandbox-1.md ./sandbox-2.md | grep -E 'mbarrier_pipeline|transpose|softmax|tf32|saxpy|geometric|rc=' | head -30
echo "== serve"; cat "$OUT/serve-ab.txt"
echo "== bench"; tar -xzOf "$OUT/logs.tar.gz" ./bench-1.md ./bench-guest-1.md | grep -E 'rc=|pageable|alone|× raw|issue' | head -40
