#!/usr/bin/env bash
# Checks the PTX sandbox on an NVIDIA GPU (see scripts/sandbox-probe/probe.c).
#   here:        bash scripts/sandbox-probe.sh pack   → .gpu/sandbox/ (rewritten PTX + globals)
#   GPU machine: bash scripts/sandbox-probe.sh run    (needs nvcc; carry [".gpu"])
#   dry run:     bash scripts/sandbox-probe.sh soft   (here, on softcuda)
# The run JIT-loads every rewritten corpus, example-guest and fixture module, then runs the
# rewritten red-team kernels against a real arena, victim allocation and control block. It times
# nothing: the sandbox's kernel-time cost is sandbox_bench's (bench/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    rm -rf .gpu/sandbox
    mkdir -p .gpu/sandbox
    cargo run -q -p ptxvm --example sandbox_dump -- .gpu/sandbox corpus/clang corpus/nvcc \
      examples/guests/kernels crates/ptxvm/tests/fixtures/kernels.ptx \
      crates/ptxvm/tests/fixtures/redteam.ptx
    cp scripts/sandbox-probe/probe.c .gpu/sandbox-probe.c
    ls .gpu/sandbox | wc -l
    ;;
  run)
    dir="${2:-.gpu/sandbox}"
    src=.gpu/sandbox-probe.c
    [ -f "$src" ] || src=scripts/sandbox-probe/probe.c
    nvcc -O2 -x c -o /tmp/sandbox-probe "$src" -lcuda
    /tmp/sandbox-probe "$dir"
    ;;
  soft)
    cargo build -q -p softcuda
    lib=$(mktemp -d)
    ln -s "$PWD/target/debug/libsoftcuda.so" "$lib/libcuda.so"
    cc -std=gnu11 -O1 -Iscripts/sandbox-probe -o "$lib/probe" scripts/sandbox-probe/probe.c \
      -L"$lib" -lcuda
    LD_LIBRARY_PATH="$lib" "$lib/probe" "${2:-.gpu/sandbox}"
    ;;
  *)
    echo "usage: $0 pack|run|soft [DIR]" >&2
    exit 2
    ;;
esac
