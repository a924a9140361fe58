#!/usr/bin/env bash
# Session 45's second call (~6 min), at the commit packed (a guest write's DMAs all enqueued
# before the first is awaited; the transfer table's raw and gpuhost pageable copies on buffers of
# their own), beside call 1's gpuhost binary (75d447a: one DMA awaited at a time, one shared
# pageable buffer), carried as .gpu/old-gpuhost.xz: `gpuhost bench --guest` alternately old, new,
# old, new (guest write and the pageable anchor), then the new `gpuhost bench` once (its sweep's
# default row beside the table), then gpuhost's locked tests and gpuhost-wasm's transfers tests.
#   bash scripts/gpu-pack.sh   (then move .gpu/perf.tar.xz and .gpu/sandbox aside, and
#   xz -c <call 1's gpuhost> > .gpu/old-gpuhost.xz)
#   device tool: run  command="bash bench/h200-runs/2026-12-06-s45/call2/call2.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh
thp() { echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"; }
gpu_call_begin thp
xz -dc .gpu/old-gpuhost.xz > /tmp/old-gpuhost && chmod +x /tmp/old-gpuhost
for i in 1 2; do
  for side in old new; do
    bin=.gpu/bin/gpuhost; [ $side = old ] && bin=/tmp/old-gpuhost
    timeout 90 $bin bench --guest --json "$OUT/logs/guest-$side-$i.json" > "$OUT/logs/guest-$side-$i.md" 2>&1
    echo "guest bench $side $i rc=$?" >> "$OUT/logs/guest-$side-$i.md"
  done
done
timeout 140 .gpu/bin/gpuhost bench --json "$OUT/logs/bench.json" > "$OUT/logs/bench.md" 2>&1
echo "bench rc=$?" >> "$OUT/logs/bench.md"
root=$PWD
for crate in gpuhost:locked gpuhost-wasm:transfers; do
  c=${crate%%:*}; f=${crate#*:}
  b=$(grep "(crates/$c)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
  (cd crates/$c && CARGO_MANIFEST_DIR=$PWD timeout 120 "$root/.gpu/bin/$b" "$f" 2>&1) > "$OUT/logs/tests-$c.txt"
done
gpu_call_end
cat "$OUT/machine.txt"
mkdir -p /tmp/l && tar -xzf "$OUT/logs.tar.gz" -C /tmp/l
for f in /tmp/l/logs/guest-*.md; do echo "== $(basename $f)"; grep -E 'host → device \||Guest write|rc=' "$f"; done
grep -E '^\| (64 MiB|transfer)|default|rc=' /tmp/l/logs/bench.md | head -20
grep -hE 'test result|FAILED|panicked' /tmp/l/logs/tests-*.txt
