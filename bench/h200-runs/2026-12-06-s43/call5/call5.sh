#!/usr/bin/env bash
# Session 43's fifth call (~6 min): every suite on NVIDIA at the commit packed (ptxvm's member
# masks and the new conformance member_masks test among them: NVIDIA's answers for tiles of 8,
# 16 and 32 lanes), and sandbox_bench twice over every corpus kernel (mbarrier_pipeline with the
# nested loops' charge only, as main has it).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s43/call5/call5.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
SKIP_FIXTURES=1 SKIP_PROBE=1 bash scripts/gpu.sh tests
tar -xzOf "$OUT/logs.tar.gz" ./tests.log | grep -E 'member_masks' || echo "member_masks: not in tests.log"
tar -xzOf "$OUT/logs.tar.gz" ./sandbox-1.md ./sandbox-2.md | grep -E 'geometric|worst|mbarrier_pipeline \|'
