#!/usr/bin/env bash
# Two builds of `gpuhost serve` side by side on one machine (issue #11's throughput): serve A on
# :18281, serve B on :18282 and the native handler (`gpuhost bench --native-http`, A's binary) on
# :18283, each the stamp repository of stamp-repo.sh (http-stamp sandboxed and trusted); then
# `oha -z SECS -c C` against native, A and B in turn, ROUNDS times per function and connection
# count (alternating, so all three see the same machine load), with each server's CPU per
# request over the run, and the mean per phase of each build's requests. Built for a shared,
# noisy machine without a GPU (softcuda by default).
#   bash scripts/probes/serve-ab.sh OLD/gpuhost NEW/gpuhost
# Env: OHA (default target/oha/bin/oha), GUESTS (folder holding http_stamp.wasm, default
# target/guests/wasm32-wasip2/release), SECS (3), ROUNDS (3), CS ("1 16"), FNS ("sandboxed
# trusted"), GPUHOST_DRIVER (softcuda), SOFTCUDA_LIB (as the loader finds it), GUESTS_B (B's own
# http_stamp.wasm folder, to compare guest builds too; default GUESTS).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 GPUHOST_A GPUHOST_B" >&2; exit 2; }
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
oha=${OHA:-target/oha/bin/oha}; secs=${SECS:-3}; rounds=${ROUNDS:-3}
gpu=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
repo_b=$work/repo
if [ -n "${GUESTS_B:-}" ]; then
  cp "$GUESTS_B/http_stamp.wasm" "$gpu/guests/" || exit 1
  repo_b=$work/repo-b; stamp_repo "$repo_b" '[serve]\nmax_concurrency = 128\n'
fi
"$1" serve --repository "$work/repo" --listen 127.0.0.1:18281 > "$work/a.out" 2> "$work/a.err" & pids+=($!)
"$2" serve --repository "$repo_b" --listen 127.0.0.1:18282 > "$work/b.out" 2> "$work/b.err" & pids+=($!)
"$1" bench --native-http 127.0.0.1:18283 --bundle crates/gpuhost/bundles/stamp-a > "$work/n.out" 2>&1 & pids+=($!)
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:18281/sandboxed > /dev/null && curl -sf http://127.0.0.1:18282/sandboxed > /dev/null \
    && curl -sf http://127.0.0.1:18283/stamp > /dev/null && break
  sleep 0.1
done
for u in 18281/sandboxed 18282/sandboxed 18281/trusted 18282/trusted 18283/stamp; do
  "$oha" --no-tui -n 1000 -c 4 "http://127.0.0.1:$u" > /dev/null
done
# The server's CPU time (user + system) in clock ticks, from /proc: CPU per request is far
# steadier than req/s on a shared machine.
source scripts/lib/proc-cpu.sh
source scripts/lib/oha.sh
echo "req/s / server CPU µs per request / p99, by connections, function, server (one column per round):"
for c in ${CS:-1 16}; do
  for f in ${FNS:-sandboxed trusted}; do
    for r in $(seq "$rounds"); do
      for t in native A B; do
        case $t in native) u=18283/stamp p=${pids[2]};; A) u=18281/$f p=${pids[0]};; B) u=18282/$f p=${pids[1]};; esac
        before=$(proc_cpu "$p")
        report=$("$oha" --no-tui -z "${secs}s" -c "$c" -w "http://127.0.0.1:$u")
        after=$(proc_cpu "$p")
        rps=$(oha_rps "$report"); p99=$(oha_us "$report" 99.00%)
        echo "$c $f $t $rps/$(proc_us_per_request $((after - before)) "$rps" "$secs")/p99=${p99:-?}us"
      done
    done
  done
done | awk '{k=$1" "$2" "$3; v[k]=v[k]" "$4} END {for (k in v) print k":"v[k]}' | sort -k1,1n -k2,2 -k3,3
echo "mean µs per request by phase, every request of the run:"
: > "$work/none.txt"
for p in 18281 18282; do
  curl -s "http://127.0.0.1:$p/metrics" > "$work/m.txt"
  for f in ${FNS:-sandboxed trusted}; do
    echo "  $([ $p = 18281 ] && echo A || echo B) $f $(python3 scripts/lib/phase_means.py "$f" "$work/none.txt" "$work/m.txt" --calls)"
  done
done
