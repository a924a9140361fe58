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
for ws in examples/guests crates/gpuhost-wasm/tests/guests; do
  cargo build --release --target wasm32-wasip2 --manifest-path "$ws/Cargo.toml" \
    --target-dir target/guests
done
mkdir -p .gpu/guests .gpu/lib
cp target/guests/wasm32-wasip2/release/*.wasm .gpu/guests/
cp "$(ls target/release/libsoftcuda.so target/release/deps/libsoftcuda.so 2>/dev/null | head -1)" .gpu/lib/
# oha, the load generator of scripts/bench-serve.sh (the GPU machine has no cargo, no network).
if [ ! -x target/oha/bin/oha ]; then
  cargo install --locked oha --root target/oha || echo "oha: install failed; bench-serve.sh needs it"
fi
mkdir -p .gpu/bin && cp target/oha/bin/oha .gpu/bin/ 2>/dev/null || true
git rev-parse HEAD > .gpu/COMMIT
git diff --quiet HEAD -- crates corpus wit examples || echo "dirty" >> .gpu/COMMIT
du -sh .gpu
