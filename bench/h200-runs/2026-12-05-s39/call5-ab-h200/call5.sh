#!/usr/bin/env bash
# Session 39's fifth GPU call: the count-down check's power-of-two test by `and` (69fea61)
# against the packed build (eebe61e), side by side: sandbox_bench of each in turn, twice (31
# kernels); then conformance's suite built at 69fea61 (every corpus kernel's answers through
# the sandbox on NVIDIA; generated programs from seed 9800, 200 + 200 per variant). The new
# binaries are .gpu/ab/*.xz, built here (cargo build --release -p conformance --example
# sandbox_bench; cargo test --release -p conformance --test all --no-run).
#   device tool: run  command="bash bench/h200-runs/next/call5.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
for f in .gpu/ab/*.xz; do xz -dkf "$f"; chmod +x "${f%.xz}"; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "old: commit $(cat .gpu/COMMIT); new: 69fea61"; date -u; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
for i in 1 2; do
  timeout 70 .gpu/bin/sandbox_bench --json "$OUT/old-$i.json" > /tmp/old-$i.md 2>&1
  timeout 70 .gpu/ab/sandbox_bench_new --json "$OUT/new-$i.json" > /tmp/new-$i.md 2>&1
done
for f in old-1 new-1 old-2 new-2; do echo "$f: $(grep -E '^graph-replayed, poll' /tmp/$f.md)"; done | tee "$OUT/ab.txt"
gpu_suites_ready
root=$PWD
(cd crates/conformance && CARGO_MANIFEST_DIR="$root/crates/conformance" SANDBOX_GEN_SEED=9800 \
  SANDBOX_GEN_CASES=200 timeout 300 "$root/.gpu/ab/conformance_new" --include-ignored \
  --test-threads=1 "${GPU_TEST_SKIPS[@]}") > "$OUT/conformance.log" 2>&1
echo "conformance rc=$?" >> "$OUT/conformance.log"
grep -E '^test result|FAILED|panicked|rc=' "$OUT/conformance.log" | head
