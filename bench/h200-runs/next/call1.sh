#!/usr/bin/env bash
# Session 41's GPU call (one: the device time left after two failed starts held one full call).
# Binaries built here at 1f5c334 (main with the corpus's mbarrier_pipeline and ptxvm's forward
# progress), packed in .gpu/ab/; the packed suites of .gpu/bin are cf99dd5's and only serve's
# stock build is used from them.
# 1. conformance's whole suite on the driver (every corpus kernel native and through the sandbox,
#    mbarrier_pipeline among them; session 40's mbarrier_sandboxed cases, never run on NVIDIA:
#    the rewritten programs' bytes, the garbage-word kernel that lost an H100's context when run
#    as written (session 37), the attacks; generated programs from seed 41000, 100 legal and 100
#    hostile per variant, the mbarrier variant among them).
# 2. sandbox_bench twice: every corpus kernel native against sandboxed, stream and graph-replayed.
# 3. serve with and without scripts/patches/wasmtime-48.0.8.patch side by side
#    (scripts/probes/serve-ab.sh; A = the packed gpuhost, stock wasmtime 48.0.8; B = the same
#    commit built with the patch through [patch.crates-io]): http-stamp sandboxed and trusted at
#    1, 16 and 64 connections, three rounds of 2 s, each round native / A / B in turn.
#   device tool: run  command="bash bench/h200-runs/next/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
for f in .gpu/ab/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "suites and bench: 1f5c334 (.gpu/ab); serve A: $(cat .gpu/COMMIT | tr '\n' ' '), B: the same with wasmtime-48.0.8.patch"
  date -u; nproc; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
gpu_suites_ready
root=$PWD
(cd crates/conformance && CARGO_MANIFEST_DIR="$root/crates/conformance" SANDBOX_GEN_SEED=41000 \
  SANDBOX_GEN_CASES=100 timeout 210 "$root/.gpu/ab/conformance_mbk" --include-ignored \
  --test-threads=1 "${GPU_TEST_SKIPS[@]}") > "$OUT/conformance.log" 2>&1
echo "conformance rc=$?" >> "$OUT/conformance.log"
for i in 1 2; do
  timeout 65 .gpu/ab/sandbox_bench_mbk --json "$OUT/sandbox-$i.json" > "$OUT/sandbox-$i.md" 2>&1
  echo "sandbox_bench rc=$?" >> "$OUT/sandbox-$i.md"
done
OHA=.gpu/bin/oha GUESTS=.gpu/guests SECS=2 ROUNDS=3 CS="1 16 64" \
  timeout 150 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost .gpu/ab/gpuhost-patched > "$OUT/serve-ab.txt" 2>&1
echo "serve-ab rc=$?" >> "$OUT/serve-ab.txt"
grep -E '^test result|FAILED|panicked|rc=' "$OUT/conformance.log" | head
grep -cE '^test .*mbarrier.* ok$' "$OUT/conformance.log"
grep -E 'mbarrier_pipeline|^stream|^graph|rc=' "$OUT"/sandbox-*.md
cat "$OUT/serve-ab.txt"
