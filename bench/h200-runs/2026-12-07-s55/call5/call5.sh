#!/usr/bin/env bash
# Session 55's fifth call (~1.5 min): what a serve request costs the machine beyond its CPU time.
# Call 4 put most of serve's latency spread at one connection outside its gpuhost:cuda calls
# (respond p90 132.6 µs against p50 64.8; the calls' p90s add up to ~61). In a KVM guest every
# TLB shootdown and cross-CPU call is a hypervisor trip that stops the CPUs it reaches, and the
# stores' teardown and jemalloc's purging unmap pages: scripts/probes/serve-ipis.sh counts them
# per request, native against serve, and serve with jemalloc never purging (B).
# Pack: call4's (.gpu/bin.tar.xz: gpuhost at dc7c8b2, oha); device tool run, carry [".gpu"].
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
export GPUHOST_DRIVER=nvidia OHA=.gpu/bin/oha GUESTS=.gpu/guests
grep -E "^ *(TLB|CAL|RES):" /proc/interrupts | cut -c1-60 > $OUT/logs/interrupts-rows.txt
SECS=3 ROUNDS=2 CS="1 16" timeout 120 bash scripts/probes/serve-ipis.sh .gpu/bin/gpuhost > $OUT/logs/serve-ipis.md 2>&1; echo "serve-ipis rc=$?" >> $OUT/logs/serve-ipis.md
gpu_call_end
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/interrupts-rows.txt
tar -xzOf $OUT/logs.tar.gz logs/serve-ipis.md
