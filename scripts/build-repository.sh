#!/usr/bin/env bash
# Rebuilds the function.wasm files of examples/repository from their sources in examples/guests
# (http-saxpy, http-mlp) and the mlp bundle's PTX from gen_model.py. Run after changing either.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --target wasm32-wasip2 --manifest-path examples/guests/Cargo.toml \
  --target-dir target/guests -p http-saxpy -p http-mlp
cp target/guests/wasm32-wasip2/release/http_saxpy.wasm examples/repository/saxpy/function.wasm
cp target/guests/wasm32-wasip2/release/http_mlp.wasm examples/repository/mlp/function.wasm
python3 examples/repository/mlp/gen_model.py examples/repository/mlp/bundle 1
cp examples/guests/kernels/saxpy.ptx examples/repository/saxpy/bundle/saxpy.ptx
