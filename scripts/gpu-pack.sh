#!/usr/bin/env bash
# Builds here everything scripts/gpu.sh runs on the GPU machine (which has no Rust toolchain):
# release test binaries of the driver-facing suites, the gpuhost binary, the example guests, and
# softcuda's library (for the loader tests). Then: device tool, command "bash scripts/gpu.sh",
# carry [".gpu"].
set -euo pipefail
cd "$(dirname "$0")/.."
../shared/gpu/pack test -p gpuhost --test all --and test -p conformance --test all \
  --and test -p gpuhost-wasm --test all --and bin -p gpuhost-cli --bin gpuhost \
  --and bin -p conformance --example sandbox_bench
cargo build --release --target wasm32-wasip2 --manifest-path examples/guests/Cargo.toml \
  --target-dir target/guests
mkdir -p .gpu/guests .gpu/lib
cp target/guests/wasm32-wasip2/release/*.wasm .gpu/guests/
cp "$(ls target/release/libsoftcuda.so target/release/deps/libsoftcuda.so 2>/dev/null | head -1)" .gpu/lib/
git rev-parse HEAD > .gpu/COMMIT
git diff --quiet HEAD -- crates corpus wit examples || echo "dirty" >> .gpu/COMMIT
du -sh .gpu
