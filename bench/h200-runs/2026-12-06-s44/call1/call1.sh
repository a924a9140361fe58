#!/usr/bin/env bash
# Session 44's first call (~6 min): every suite on NVIDIA's driver at the commit packed (launches
# count their start in the control block; the watchdog charges a launch from its start, and the
# red team's new test queues a guest behind an attacker whose kernel fills every SM), with
# sandbox_bench twice over every corpus kernel (scripts/gpu.sh tests).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s44/call1/call1.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
SKIP_FIXTURES=1 SKIP_PROBE=1 bash scripts/gpu.sh tests
tar -xzOf "$OUT/logs.tar.gz" ./tests.log | grep -E 'a_guest_queued|every_launch_counts|held_off' || echo "new tests: not in tests.log"
tar -xzOf "$OUT/logs.tar.gz" ./sandbox-1.md ./sandbox-2.md | grep -E 'geometric|worst'
