#!/usr/bin/env bash
# The next GPU call (~2 min), prepared in session 42 and not run (its device time was spent):
# the sandboxed mbarrier arrival as 32-bit atomic adds (9e4ab62, 167ef86) on the H200.
# Session 42's call 3 again (conformance's mbarrier cases and every corpus kernel through the sandbox, then
# sandbox_bench twice on mbarrier_pipeline beside four kernels; there 114.9 us sandboxed against
# 6.66 native, with 64-bit adds), on a new seed.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/next/call1.sh"  carry=[".gpu"]
SEED=42002 exec bash "$(dirname "$0")/../2026-12-06-s42/call3/call3.sh"
