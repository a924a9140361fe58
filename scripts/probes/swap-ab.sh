#!/usr/bin/env bash
# Swaps under load, two builds side by side (issue #11: p99 during swaps ≤ 1.5× steady). A and
# B each serve their own stamp repository (stamp-repo.sh) on :18291 and :18292. Per round and
# connection count, each build in turn (alternating which goes first): `oha -z SECS -c C`
# steady, then the same while its sandboxed function is reloaded every SWAP_MS with the bundle
# alternating stamp-a / stamp-b. Printed per build and round: steady p99, the swap window's p99
# and their ratio, answers other than 200, the requests of the window that found no warm Store
# (gpuhost_function_warm_store_takes_total{result="miss"}), and the loads' answers (`warmed`
# and `warm_ms` where the build reports them). Built for the GPU machine and for softcuda alike.
#   bash scripts/probes/swap-ab.sh OLD/gpuhost NEW/gpuhost
# Env: OHA (target/oha/bin/oha), GUESTS (folder holding http_stamp.wasm, default
# target/guests/wasm32-wasip2/release), SECS (4), ROUNDS (2), CS ("16 64"), SWAP_MS (500),
# GPUHOST_DRIVER (softcuda).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 GPUHOST_A GPUHOST_B" >&2; exit 2; }
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
oha=${OHA:-target/oha/bin/oha}; secs=${SECS:-4}; rounds=${ROUNDS:-2}; swap_ms=${SWAP_MS:-500}
gpu=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh
source scripts/lib/oha.sh
for t in A B; do stamp_repo "$work/$t" '[serve]\nmax_concurrency = 128\nmax_queue = 1024\n'; done
"$1" serve --repository "$work/A" --listen 127.0.0.1:18291 > "$work/a.out" 2> "$work/a.err" & pids+=($!)
"$2" serve --repository "$work/B" --listen 127.0.0.1:18292 > "$work/b.out" 2> "$work/b.err" & pids+=($!)
port() { [ "$1" = A ] && echo 18291 || echo 18292; }
for t in A B; do
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$(port $t)/sandboxed" > /dev/null && break; sleep 0.1; done
  "$oha" --no-tui -n 3000 -c 16 "http://127.0.0.1:$(port $t)/sandboxed" > /dev/null
done
# Requests that found no warm Store, so far.
misses() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '/^gpuhost_function_warm_store_takes_total\{/ &&
    /function="sandboxed"/ && /result="miss"/ {s += $2} END {printf "%.0f", s}'
}
# Answers other than 200 in an oha report (its status lines and its error lines).
not_200() {
  awk '/^ *\[[0-9]+\] [0-9]+ responses/ { if ($1 != "[200]") s += $2 }
       /^ *\[[0-9]+\] .*error/ { s += $1 } END {printf "%d", s}' <<< "$1"
}
# The loads' answers in file $1, one JSON a line: how many were ok, and their figures.
load_answers() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = [r for r in rows if "version" in r]
def col(k, f):
    v = [f.format(r[k]) for r in ok if k in r]
    return "/".join(v) if v else "-"
print(f"{len(ok)} of {len(rows)} ok; warmed {col('warmed', '{}')}; warm_ms {col('warm_ms', '{:.1f}')};"
      f" load_ms {col('load_ms', '{:.1f}')}")
PY
}
echo "build round c | steady p99 µs | swap-window p99 µs | ratio | non-200 steady/window | window misses | loads"
for c in ${CS:-16 64}; do
  for r in $(seq "$rounds"); do
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for t in $order; do
      p=$(port "$t"); url="http://127.0.0.1:$p/sandboxed"; repo=$work/$t
      steady=$("$oha" --no-tui -z "${secs}s" -c "$c" -w "$url")
      m0=$(misses "$p")
      "$oha" --no-tui -z "${secs}s" -c "$c" -w "$url" > "$work/window.txt" & load=$!
      : > "$work/loads.txt"; i=0
      while kill -0 "$load" 2>/dev/null; do
        sleep "$(awk "BEGIN{print $swap_ms / 1000}")"
        kill -0 "$load" 2>/dev/null || break
        b=stamp-b; [ $((i % 2)) = 1 ] && b=stamp-a; i=$((i + 1))
        cp crates/gpuhost/bundles/$b/* "$repo/sandboxed/bundle/"
        curl -s -X POST "http://127.0.0.1:$p/v2/repository/models/sandboxed/load" >> "$work/loads.txt"
        echo >> "$work/loads.txt"
      done
      wait "$load"; window=$(cat "$work/window.txt")
      m1=$(misses "$p")
      sp=$(oha_us "$steady" 99.00%); wp=$(oha_us "$window" 99.00%)
      loads=$(load_answers "$work/loads.txt")
      echo "$t $r $c | $sp | $wp | $(awk "BEGIN{printf \"%.2f\", $wp / $sp}") | $(not_200 "$steady")/$(not_200 "$window") | $((m1 - m0)) | $loads"
    done
  done
done
