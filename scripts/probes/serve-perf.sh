#!/usr/bin/env bash
# Where `gpuhost serve`'s CPU goes per request (issue #11), on a machine with perf (not the GPU
# machine's image): the http-stamp function of stamp-repo.sh under `oha -c $C` for $SECS seconds,
# `perf record --call-graph dwarf` on the server meanwhile, then the CPU by cost centre
# (scripts/lib/perf_centres.py: refill, teardown, the guest's gpuhost:cuda and wasi calls, the
# component-model plumbing, its own wasm code, hyper/axum, tokio, other threads) in % and µs per
# request, and the mean per phase.
#   bash scripts/probes/serve-perf.sh GPUHOST [sandboxed|trusted]
# Env: OHA (target/oha/bin/oha), GUESTS (target/guests/wasm32-wasip2/release), SECS (5), C (1),
# HZ (499), GPUHOST_DRIVER (softcuda), KEEP (a folder to keep perf.data and the script text in).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 GPUHOST [sandboxed|trusted]" >&2; exit 2; }
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
fn=${2:-sandboxed}; oha=${OHA:-target/oha/bin/oha}; secs=${SECS:-5}; c=${C:-1}; hz=${HZ:-499}
gpu=$(mktemp -d); work=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
"$1" serve --repository "$work/repo" --listen 127.0.0.1:18481 > "$work/out" 2> "$work/err" & pid=$!
url=http://127.0.0.1:18481/$fn
for _ in $(seq 300); do curl -sf "$url" > /dev/null && break; sleep 0.1; done
"$oha" --no-tui -n 1000 -c "$c" "$url" > /dev/null
curl -s http://127.0.0.1:18481/metrics > "$work/before.txt"
"$oha" --no-tui -z "$((secs + 2))s" -c "$c" -w "$url" > "$work/oha.txt" &
sleep 1
perf record -q -F "$hz" --call-graph dwarf,16384 -p "$pid" -o "$work/perf.data" -- sleep "$secs" > /dev/null 2>&1
wait $!
curl -s http://127.0.0.1:18481/metrics > "$work/after.txt"
rps=$(awk '/Requests\/sec/ {print $2}' "$work/oha.txt")
echo "$fn c=$c: $rps req/s (p50 $(awk '/50.00%/ {print $3" "$4}' "$work/oha.txt"))"
perf script -i "$work/perf.data" -F comm,tid,ip,sym --no-inline 2> /dev/null > "$work/script.txt"
python3 scripts/lib/perf_centres.py "$work/script.txt" "$hz" "$(python3 -c "print($rps * $secs)")"
python3 scripts/lib/phase_means.py "$fn" "$work/before.txt" "$work/after.txt"
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/perf.data" "$work/script.txt" "$KEEP/"; fi
