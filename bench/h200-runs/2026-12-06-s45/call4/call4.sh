#!/usr/bin/env bash
# Session 45's fourth call (~6 min), at the session's last code (call 1's script again): every GPU
# suite both ways (scripts/gpu.sh tests), then `gpuhost bench --guest` twice (the guest write
# against raw pinned, its first two writes apart).
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s45/call4/call4.sh"  carry=[".gpu"]
exec bash "$(dirname "$0")/../call1/call1.sh"
