#!/usr/bin/env bash
# Regenerates call2's nowaitall.ptx: the rewrite of corpus/nvcc/mbarrier_pipeline.ptx at the
# packed commit without the `cp.async.wait_all` that the sandbox puts before
# cp.async.mbarrier.arrive, timed through sandbox_bench's "from file" column: what an
# asynchronous arrival could gain at most (not safe, and its consumers may read a stage before
# its copies land: timing only). Run from the checkout root after
# `cargo build --release -p ptxvm --example sandbox_dump`.
set -eu
here=$(dirname "$0"); tmp=$(mktemp -d)
target/release/examples/sandbox_dump "$tmp" corpus/nvcc/mbarrier_pipeline.ptx
grep -v 'cp.async.wait_all;' "$tmp/nvcc__mbarrier_pipeline.ptx" > "$here/nowaitall.ptx"
rm -rf "$tmp"
