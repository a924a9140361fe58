#!/usr/bin/env bash
# Session 57's fourth call (87 s, the same lease, warm): the second run of session 56 call1's
# serve-ab (release A against dist B, sandboxed http-stamp, 3 alternating rounds of 3 s at 1, 16
# and 64 connections). Pack and device tool as session 56's call1 (carry [".gpu"]).
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
ROUNDS=3 SECS=3 CS="1 16 64" FNS="sandboxed" timeout 150 bash scripts/probes/serve-ab.sh .gpu/bin/gpuhost-rel .gpu/bin/gpuhost > $OUT/logs/serve-ab-lto-2.md 2>&1; echo "serve-ab lto rc=$?" >> $OUT/logs/serve-ab-lto-2.md
gpu_call_end
