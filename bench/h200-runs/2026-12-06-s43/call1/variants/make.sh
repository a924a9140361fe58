#!/usr/bin/env bash
# Regenerates call1's hand-edited rewrites of corpus/nvcc/mbarrier_pipeline.ptx, timed through
# sandbox_bench's "from file" column (SANDBOX_BENCH_FILE); none of them is safe, they only time
# what a change would buy:
#   noifconv.ptx   the rewrite without if-conversion (SANDBOX_OFF=ifconvert): 56 registers under
#                  the local ptxas 13.0 (sm_90) against 168 with it (native 36);
#   nowaitall.ptx  the default rewrite without the `cp.async.wait_all` that the sandbox puts before
#                  cp.async.mbarrier.arrive: the most an asynchronous arrival could gain (its
#                  consumers may read a stage before its copies land: timing only);
#   both.ptx       both edits.
# Run from the checkout root after `cargo build --release -p ptxvm --example sandbox_dump`.
set -eu
here=$(dirname "$0"); tmp=$(mktemp -d)
dump=target/release/examples/sandbox_dump
$dump "$tmp/on" corpus/nvcc/mbarrier_pipeline.ptx
SANDBOX_OFF=ifconvert $dump "$tmp/off" corpus/nvcc/mbarrier_pipeline.ptx
cp "$tmp/off/nvcc__mbarrier_pipeline.ptx" "$here/noifconv.ptx"
grep -v 'cp.async.wait_all;' "$tmp/on/nvcc__mbarrier_pipeline.ptx" > "$here/nowaitall.ptx"
grep -v 'cp.async.wait_all;' "$tmp/off/nvcc__mbarrier_pipeline.ptx" > "$here/both.ptx"
rm -rf "$tmp"
