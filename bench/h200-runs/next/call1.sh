#!/usr/bin/env bash
# The GPU call session 41 prepared and could not run (eight starts found no machine; their cost
# used up the session's device time). For the next GPU session, about 5 minutes of device time:
# 1. conformance on the driver: session 40's mbarrier_sandboxed cases, never run on NVIDIA (the
#    rewritten programs' bytes; the garbage-word kernel that lost an H100's context when run as
#    written, session 37; the attacks), the generated programs with mbarrier (seed 41000, 60
#    legal and 60 hostile), mbarrier_pipeline native, and every corpus kernel through the sandbox
#    (mbarrier_pipeline among them);
# 2. sandbox_bench twice on mbarrier_pipeline and the kernels with the worst graph-replayed
#    ratios of session 39: native against sandboxed, stream and graph-replayed;
# 3. serve with and without scripts/patches/wasmtime-48.0.8.patch side by side
#    (scripts/probes/serve-ab.sh; A = the packed gpuhost, stock wasmtime 48.0.8; B = the same
#    commit built with the patch): http-stamp sandboxed and trusted at 16 and 64 connections,
#    two rounds of 2 s, each round native / A / B in turn.
# Build here first (.gpu and the tree together must stay under the device tool's 64 MiB: leave
# .gpu/perf.tar.xz and .gpu/sandbox out of this call):
#   bash scripts/gpu-pack.sh
#   git worktree add --detach ../wt-serve HEAD && bash scripts/patches/wasmtime-patched.sh ../wt-serve/vendor
#   (add the [patch.crates-io] lines it prints to ../wt-serve/Cargo.toml; cargo update -p
#   wasmtime --offline; cargo build --release -p gpuhost-cli --bin gpuhost there; strip
#   --strip-debug -o .gpu/ab/gpuhost-patched ITS_TARGET/release/gpuhost; xz .gpu/ab/*)
#   device tool: run  command="bash bench/h200-runs/next/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
for f in .gpu/ab/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .gpu/COMMIT | tr '\n' ' '); serve B: the same with wasmtime-48.0.8.patch"
  date -u; nproc; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
gpu_suites_ready
# Every packed suite, filtered to these tests (conformance holds them all).
SANDBOX_GEN_SEED=41000 SANDBOX_GEN_CASES=60 timeout 90 bash .gpu/run.sh mbarrier \
  every_corpus_kernel_gives_its_reference_answer_through_the_sandbox > "$OUT/conformance.log" 2>&1
echo "conformance rc=$?" >> "$OUT/conformance.log"
for i in 1 2; do
  SANDBOX_BENCH_KERNELS=mbarrier_pipeline,saxpy,softmax_rows,transpose,mma_gemm_wmma_tf32 \
    timeout 30 .gpu/bin/sandbox_bench --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "sandbox_bench rc=$?" >> "$OUT/sandbox-$i.md"
done
OHA=.gpu/bin/oha GUESTS=.gpu/guests SECS=2 ROUNDS=2 CS="16 64" \
  timeout 70 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/ab/gpuhost-patched > "$OUT/serve-ab.txt" 2>&1
echo "serve-ab rc=$?" >> "$OUT/serve-ab.txt"
grep -E '^test result|FAILED|panicked|rc=' "$OUT/conformance.log" | head
grep -cE '^test .*mbarrier.* ok$' "$OUT/conformance.log"
grep -E 'mbarrier_pipeline|^stream|^graph|rc=' "$OUT"/sandbox-*.md
cat "$OUT/serve-ab.txt"
