#!/bin/sh
# Regenerates compiled.ptx from compiled.ll with LLVM's llc (NVPTX backend): compiler-shaped PTX
# (clang's and nvcc's calling convention, generic pointers, local frames) for the red-team guest.
# attacks.ptx, trap.ptx and globals.ptx are hand-written.
set -eu
cd "$(dirname "$0")"
"${LLC:-llc}" -march=nvptx64 -mcpu=sm_50 -mattr=+ptx70 -O2 -o compiled.ptx compiled.ll
