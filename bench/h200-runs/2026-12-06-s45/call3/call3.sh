#!/usr/bin/env bash
# Session 45's third call (~4 min), at the commit packed (page-locked regions of 2 MiB or more,
# and guest memories, advised for transparent huge pages) beside call 2's gpuhost binary
# (de5c640: plain heap regions), carried as .gpu/old-gpuhost.xz: `gpuhost bench` and then
# `gpuhost bench --guest`, alternately old, new, old, new (the pageable table and sweep, the
# HostBuffer rows, the guest write), then gpuhost's transfer, host-buffer and locked tests.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside, and
#   xz -c <call 2's gpuhost> > .gpu/old-gpuhost.xz)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s45/call3/call3.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
thp() { echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"; }
gpu_call_begin eval 'thp; uname -r'
xz -dc .gpu/old-gpuhost.xz > /tmp/old-gpuhost && chmod +x /tmp/old-gpuhost
for i in 1 2; do
  for side in old new; do
    bin=.gpu/bin/gpuhost; [ $side = old ] && bin=/tmp/old-gpuhost
    timeout 140 $bin bench --json "$OUT/logs/bench-$side-$i.json" > "$OUT/logs/bench-$side-$i.md" 2>&1
    echo "bench $side $i rc=$?" >> "$OUT/logs/bench-$side-$i.md"
    grep AnonHugePages /proc/meminfo >> "$OUT/logs/bench-$side-$i.md"
    timeout 90 $bin bench --guest --json "$OUT/logs/guest-$side-$i.json" > "$OUT/logs/guest-$side-$i.md" 2>&1
    echo "guest bench $side $i rc=$?" >> "$OUT/logs/guest-$side-$i.md"
  done
done
root=$PWD
b=$(grep "(crates/gpuhost)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/gpuhost && CARGO_MANIFEST_DIR=$PWD timeout 120 "$root/.gpu/bin/$b" transfer host_buffer locked 2>&1) > "$OUT/logs/tests-gpuhost.txt"
gpu_call_end
cat "$OUT/machine.txt"
mkdir -p /tmp/l && tar -xzf "$OUT/logs.tar.gz" -C /tmp/l
for f in /tmp/l/logs/bench-*.md; do echo "== $(basename $f)"; grep -E '64 MiB \||\| default|rc=' "$f" | head -8; done
for f in /tmp/l/logs/guest-*.md; do echo "== $(basename $f)"; grep -E 'host → device \||Guest write|rc=' "$f"; done
grep -hE 'test result|FAILED|panicked' /tmp/l/logs/tests-*.txt
