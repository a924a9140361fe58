#!/usr/bin/env bash
# Builds a patched wasmtime 48.0.8 crate beside a checkout, for an A/B of `gpuhost serve` with
# and without wasmtime-48.0.8.patch (README.md here says what it changes and what it measured).
# The patch is not applied on main: it is to be measured on the GPU host and offered upstream.
#   bash scripts/patches/wasmtime-patched.sh DIR
# makes DIR/wasmtime-48.0.8 (the crates.io crate from cargo's registry, patched) and prints the
# [patch.crates-io] entry to add to the workspace Cargo.toml of the checkout that should use it
# (then `cargo update -p wasmtime --offline` drops the registry checksum from Cargo.lock).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
cargo fetch -q --manifest-path "$here/../../Cargo.toml" --locked >/dev/null
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/wasmtime-48.0.8 | head -1)
[ -d "$src" ] || { echo "wasmtime-48.0.8 is not in cargo's registry" >&2; exit 1; }
rm -rf "$out/wasmtime-48.0.8"
cp -r "$src" "$out/wasmtime-48.0.8"
rm -f "$out/wasmtime-48.0.8/Cargo.toml.orig" "$out/wasmtime-48.0.8/.cargo_vcs_info.json"
patch -s -p1 -d "$out/wasmtime-48.0.8" < "$here/wasmtime-48.0.8.patch"
echo "[patch.crates-io]"
echo "wasmtime = { path = \"$out/wasmtime-48.0.8\" }"
