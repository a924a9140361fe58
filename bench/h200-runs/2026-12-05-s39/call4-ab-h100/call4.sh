#!/usr/bin/env bash
# Session 39's fourth GPU call: the helper's stop blocks and compare before loops (s39-rep,
# merged at eebe61e) against main before them (36c09aa), side by side: sandbox_bench of each
# build in turn, twice (31 kernels). The old build is .gpu/ab/sandbox_bench_old.xz, made here
# from a worktree at 36c09aa (cargo build --release -p conformance --example sandbox_bench).
#   device tool: run  command="bash bench/h200-runs/next/call4.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../.."
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia
xz -dkf .gpu/ab/sandbox_bench_old.xz && chmod +x .gpu/ab/sandbox_bench_old
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "new: commit $(cat .gpu/COMMIT); old: 36c09aa"; date -u; } > "$OUT/machine.txt"
cat "$OUT/machine.txt"
for i in 1 2; do
  timeout 70 .gpu/ab/sandbox_bench_old --json "$OUT/old-$i.json" > "$OUT/old-$i.md" 2>&1
  timeout 70 .gpu/bin/sandbox_bench --json "$OUT/new-$i.json" > "$OUT/new-$i.md" 2>&1
done
for f in old-1 new-1 old-2 new-2; do echo "$f: $(grep -E '^graph-replayed, poll' "$OUT/$f.md")"; done
