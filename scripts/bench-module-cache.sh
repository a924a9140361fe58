#!/usr/bin/env bash
# What a serve function's module cache saves a handler that loads its own PTX on every request:
# `gpuhost serve` with the http-misbehave test function (sandboxed; `/globals` loads
# tests/guests/kernels/globals.ptx itself, then launches 3 kernels), one request (the cache's
# miss: rewrite + driver load), then N more (hits), read from /metrics' timed host calls. Prints
# the mean `module.from-ptx` time of the miss and of the hits, and the requests' mean latency.
#
#   bash scripts/bench-module-cache.sh [N]        # N (default 500) requests after the first
#
# Needs target/release/gpuhost (or GPUHOST_BIN) and the test guests built (or GUEST_WASM) (cargo test -p gpuhost-cli builds them
# into target/guests). GPUHOST_DRIVER picks the driver as for gpuhost itself.
set -euo pipefail
n=${1:-500}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${GPUHOST_BIN:-$root/target/release/gpuhost}
wasm=${GUEST_WASM:-$root/target/guests/wasm32-wasip2/release/http_misbehave.wasm}
for f in "$bin" "$wasm"; do
  [ -e "$f" ] || { echo "missing $f: build it first (see the header)" >&2; exit 2; }
done
repo=$(mktemp -d)
log=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$repo" "$log"' EXIT
mkdir -p "$repo/misbehave"
cp "$wasm" "$repo/misbehave/function.wasm"
: > "$repo/misbehave/function.toml"
"$bin" serve --repository "$repo" --listen 127.0.0.1:0 > "$log" 2> /dev/null &
pid=$!
addr=
for _ in $(seq 1 300); do
  addr=$(sed -n 's|^listening on http://||p' "$log" | head -1)
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$log" >&2; exit 1; }
until curl -sf "http://$addr/v2/models/misbehave/ready" > /dev/null; do sleep 0.1; done
calls() { # count and seconds of module.from-ptx so far
  curl -s "http://$addr/metrics" | awk '
    /^gpuhost_host_calls_total\{.*module\.from-ptx/ {c=$NF}
    /^gpuhost_host_call_seconds_total\{.*module\.from-ptx/ {s=$NF}
    END {print c+0, s+0}'
}
want='bumped [1, 2, 3]'
[ "$(curl -s "http://$addr/misbehave/globals")" = "$want" ] || { echo "wrong answer" >&2; exit 1; }
read -r c1 s1 < <(calls)
start=$(date +%s.%N)
for _ in $(seq 1 "$n"); do
  [ "$(curl -s "http://$addr/misbehave/globals")" = "$want" ] || { echo "wrong answer" >&2; exit 1; }
done
end=$(date +%s.%N)
read -r c2 s2 < <(calls)
loads=$(curl -s "http://$addr/metrics" | grep '^gpuhost_function_module_loads_total' | tr '\n' ' ')
awk -v c1="$c1" -v s1="$s1" -v c2="$c2" -v s2="$s2" -v n="$n" -v t0="$start" -v t1="$end" \
  -v loads="$loads" 'BEGIN {
  t = t1 - t0; miss = s1 / c1 * 1e6; hit = (s2 - s1) / (c2 - c1) * 1e6
  printf "| module.from-ptx, first request (rewritten and loaded) | %.1f us |\n", miss
  printf "| module.from-ptx, next %d requests (cached), mean | %.1f us |\n", n, hit
  printf "| ratio cached / loaded | %.4f |\n", hit / miss
  printf "| request mean, curl round trip included | %.0f us |\n", t / n * 1e6
  printf "\n%s\n", loads
}'
