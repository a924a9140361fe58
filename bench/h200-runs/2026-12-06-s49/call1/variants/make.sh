#!/usr/bin/env bash
# Regenerates call1's hand-edited rewrites of corpus/nvcc/mbarrier_pipeline.ptx, timed through
# sandbox_bench's "from file" column (SANDBOX_BENCH_FILE). What they ask: does the software
# mbarrier's spin cost the kernel by taking issue slots from the warps it waits on? The hardware's
# try_wait suspends a waiting warp; the sandbox's wait tests once and the guest's loop spins.
#   base.ptx          the rewrite unchanged (an A/A check of the "from file" column);
#   nsK.ptx           a failed wait test sleeps K ns (`@!p nanosleep.u32 K`), K = 20 … 500;
#   relaxed.ptx       the wait's load relaxed, and a `fence.acq_rel.cta` once the phase is over;
#   relaxed_ns50.ptx  both.
# Run from the checkout root after `cargo build --release -p ptxvm --example sandbox_dump`.
set -eu
here=$(dirname "$0"); tmp=$(mktemp -d)
target/release/examples/sandbox_dump "$tmp" corpus/nvcc/mbarrier_pipeline.ptx > /dev/null
src=$tmp/nvcc__mbarrier_pipeline.ptx
test_line='/setp.ne.u64 p, %__sbx_x, 0;/'
cp "$src" "$here/base.ptx"
for k in 20 50 100 200 500; do
  awk -v k="$k" "{print} $test_line{print \"\\t@!p nanosleep.u32 \" k \";\"}" "$src" > "$here/ns$k.ptx"
done
relax='{ if ($0 ~ /ld.acquire.cta.shared.u32 %__sbx_o, \[%__sbx_a\+4\];/) sub(/ld.acquire/, "ld.relaxed"); print }'
awk "$relax $test_line{print \"\\t@p fence.acq_rel.cta;\"}" "$src" > "$here/relaxed.ptx"
awk "$relax $test_line{print \"\\t@p fence.acq_rel.cta;\"; print \"\\t@!p nanosleep.u32 50;\"}" "$src" > "$here/relaxed_ns50.ptx"
grep -c 'nanosleep\|fence.acq_rel.cta' "$here"/*.ptx
rm -rf "$tmp"
