#!/usr/bin/env bash
# Driver calls per request of serve's targets and the native handler (issue #11): on NVIDIA
# the driver serializes much of its work under its own locks, so at 16 connections and more
# every call a request makes is time the other requests wait for. Runs here, on softcuda: a
# uprobe on every cu* export of libsoftcuda.so (root and tracefs needed), counted by `perf
# stat` on the serving process while `oha -n N -c C` sends one target's requests; prints per
# target the calls per request by function, the calls past the request count's noise left out.
#   GPU_DIR=/tmp/g3 SOFTCUDA_LIB=$PWD/target/release/deps/libsoftcuda.so \
#     bash scripts/probes/driver-calls.sh
# Env: TARGETS ("native sandboxed trusted"; see floor-servers.sh), N (2000), C (1), GPU_DIR (a
# folder laid out as .gpu/: bin/gpuhost, bin/oha, guests/).
set -uo pipefail
cd "$(dirname "$0")/../.."
gpu=${GPU_DIR:?a folder with bin/gpuhost, bin/oha and guests/}; oha=$gpu/bin/oha
lib=${SOFTCUDA_LIB:?the libsoftcuda.so gpuhost loads}
export GPUHOST_DRIVER=softcuda SOFTCUDA_LIB=$lib
n=${N:-2000}; c=${C:-1}; targets=${TARGETS:-native sandboxed trusted}
tracefs=/sys/kernel/tracing
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; grep -o "^p:sc/[^ ]*" "$work/probes" 2>/dev/null | sed "s/^p:/-:/" >> $tracefs/uprobe_events 2>/dev/null; rm -rf "$work"' EXIT
# A uprobe's offset is the symbol's address less the executable segment's address-offset gap.
python3 - "$lib" > "$work/probes" <<'PY'
import re, subprocess, sys
lib = sys.argv[1]
segs = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True).stdout
load = next(l.split() for l in segs.splitlines() if l.split()[:1] == ["LOAD"] and " R E " in l)
gap = int(load[2], 16) - int(load[1], 16)
syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
for line in syms.splitlines():
    addr, kind, name = line.split()
    if kind == "T" and name.startswith("cu"):
        print(f"p:sc/{name} {lib}:{int(addr, 16) - gap:#x}")
PY
cat "$work/probes" >> $tracefs/uprobe_events || { echo "cannot add uprobes (root and tracefs needed)"; exit 1; }
source scripts/probes/floor-servers.sh
floor_servers "$work"
for t in $targets; do
  "$oha" --no-tui -n 500 -c "$c" "$(url "$t")" > /dev/null
  pid=$serve_pid; [ "$t" = native ] && pid=$native_pid
  perf stat -x, -e 'sc:*' -p "$pid" -o "$work/$t.csv" &
  stat=$!
  sleep 0.5
  "$oha" --no-tui -n "$n" -c "$c" "$(url "$t")" > /dev/null
  sleep 0.5
  kill -INT $stat; wait $stat
  echo "== $t: driver calls per request ($n requests, $c connections)"
  awk -F, -v n="$n" '$3 ~ /^sc:/ && $1 + 0 >= n / 20 {
    total += $1; printf "  %-28s %6.2f\n", substr($3, 4), $1 / n } END { printf "  %-28s %6.2f\n", "all", total / n }' \
    "$work/$t.csv" | sort -k2 -nr
done
