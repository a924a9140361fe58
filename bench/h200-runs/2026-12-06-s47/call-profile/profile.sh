#!/usr/bin/env bash
# Session 47's serve profile (~3 min), at abfbac8's pack (call 1's): where the server's CPU goes
# per request under oha at 16 connections (scripts/probes/serve-profile.sh: perf with DWARF
# stacks, cost centres and innermost functions), for the native handler, the sandboxed http-stamp
# function and http-hello; the perf scripts kept for reading here.
#   bash scripts/gpu-pack.sh   (keep .gpu/perf.tar.xz; move .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s47/call-profile/profile.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
gpu_call_begin
KEEP_SCRIPT=1 C=16 SECS=4 TARGETS="native sandboxed hello" timeout 400 \
  bash scripts/probes/serve-profile.sh "$OUT/logs/profile" > "$OUT/logs/profile.txt" 2>&1
echo "profile rc=$?" >> "$OUT/logs/profile.txt"
gpu_call_end
cat "$OUT/machine.txt"
tar -xzOf "$OUT/logs.tar.gz" logs/profile.txt | grep -vE '^    ' | head -120
