#!/usr/bin/env bash
# scripts/bench-serve.sh's steady-state part where there is no GPU (softcuda): the http-stamp
# function (sandboxed, max_concurrency 128) against the native handler (`gpuhost bench
# --native-http`) at each of $CS connections for $SECS seconds, one line per target: req/s, p99,
# and for serve the warm-Store hits and misses of the run (gpuhost_function_warm_store_takes_total
# from /metrics before and after). softcuda runs the kernels on the CPU, and on a shared machine
# the ratios move with the other load: compare medians of several runs; the miss rate is the
# steadier figure.
#   bash scripts/probes/serve-local.sh LABEL GPUHOST
# Env: T (the target folder: $CARGO_TARGET_DIR, else target; oha, guests and libsoftcuda.so are
# taken from it), SECS (5), CS ("1 16 64").
set -uo pipefail
cd "$(dirname "$0")/../.."
label=$1; bin=$2; T=${T:-${CARGO_TARGET_DIR:-target}}
oha=$T/oha/bin/oha; secs=${SECS:-5}
export GPUHOST_DRIVER=softcuda SOFTCUDA_LIB=$T/release/libsoftcuda.so
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/repo/stamp/bundle"
cp "$T/guests/wasm32-wasip2/release/http_stamp.wasm" "$work/repo/stamp/function.wasm"
cp crates/gpuhost/bundles/stamp-a/* "$work/repo/stamp/bundle/"
printf '[serve]\nmax_concurrency = 128\nmax_queue = 1024\n' > "$work/repo/stamp/function.toml"
port=$((18300 + RANDOM % 500)); serve=http://127.0.0.1:$port; native=http://127.0.0.1:$((port + 1))
"$bin" serve --repository "$work/repo" --listen "127.0.0.1:$port" > "$work/serve.out" 2>&1 &
"$bin" bench --native-http "127.0.0.1:$((port + 1))" --bundle crates/gpuhost/bundles/stamp-a > "$work/native.out" 2>&1 &
for _ in $(seq 200); do
  curl -sf "$serve/stamp" > /dev/null && curl -sf "$native/stamp" > /dev/null && break; sleep 0.1
done
source scripts/lib/oha.sh
takes() { curl -s "$serve/metrics" | awk -v r="result=\"$1\"" '/^gpuhost_function_warm_store_takes_total/ && index($0, r) {s += $2} END {print s + 0}'; }
for c in ${CS:-1 16 64}; do
  for target in native serve; do
    url=$serve/stamp; [ $target = native ] && url=$native/stamp
    h0=$(takes hit); m0=$(takes miss)
    out=$("$oha" --no-tui -z "${secs}s" -c "$c" -w "$url")
    rps=$(oha_rps "$out"); p99=$(oha_us "$out" 99.00%)us
    echo "$label c=$c $target rps=$rps p99=$p99 hits=$(($(takes hit) - h0)) misses=$(($(takes miss) - m0))"
  done
done
