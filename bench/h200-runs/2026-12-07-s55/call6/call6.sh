#!/usr/bin/env bash
# Session 55's sixth call (~2 min), asked of an H200 (issue #12's goals are the H200's): the
# benchmark phase of scripts/gpu.sh (gpuhost bench twice, bench --guest twice, the serve bench)
# from call 4's pack (gpuhost at dc7c8b2 and oha; launch_probe is not in it, so that step fails).
# Device tool run, kind nvidia-h200, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
export OUT="${OUT:-/tmp/out}"
timeout 400 bash scripts/gpu.sh bench > "$OUT/bench-phase.txt" 2>&1
echo "bench phase rc=$?" >> "$OUT/bench-phase.txt"
tail -45 "$OUT/bench-phase.txt"
