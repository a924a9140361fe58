#!/usr/bin/env bash
# Where serve's CPU goes on the GPU machine (issue #11), by cost centre and by innermost function:
# each target of serve-floor.sh (native, hello, ladderN, sandboxed, ...) under `oha -c $C` for
# $SECS seconds while `perf record --call-graph dwarf` samples the server; then, per target,
# scripts/lib/perf_centres.py in µs per request (centres, then the innermost functions with
# their library: libcuda, libc, the kernel, wasm code). The GPU machine's image has no perf:
# scripts/lib/perf-pack.sh packs this machine's into .gpu/perf.tar.xz, and this script unpacks
# it. Give the packed gpuhost its symbol table (`strip --strip-debug`, not `strip`): perf names
# the frames there, from .symtab, and unwinds them by .eh_frame.
#   bash scripts/probes/serve-profile.sh OUTDIR
# Env: TARGETS ("native hello ladder0 ladder3 ladder4 ladder5"), C (16), SECS (4), HZ (199),
# STACK (dwarf stack bytes per sample, 8192), GPU_DIR (a folder laid out as .gpu/),
# GPUHOST_DRIVER (nvidia), PERF (a perf command; default .gpu/perf's, else perf on PATH).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1; mkdir -p "$out"
[ -n "${GPU_DIR:-}" ] || source scripts/lib/gpu-bin.sh
gpu=${GPU_DIR:-$PWD/.gpu}; oha=$gpu/bin/oha
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
c=${C:-16}; secs=${SECS:-4}; hz=${HZ:-199}; stack=${STACK:-8192}
if [ -z "${PERF:-}" ]; then
  if [ -f .gpu/perf.tar.xz ]; then
    [ -d .gpu/perf ] || tar -C .gpu -xJf .gpu/perf.tar.xz
    PERF="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
  else
    PERF=perf
  fi
fi
$PERF --version > /dev/null || { echo "no usable perf ($PERF)" >&2; exit 1; }
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
source scripts/probes/floor-servers.sh
floor_servers "$work"
for t in ${TARGETS:-native hello ladder0 ladder3 ladder4 ladder5}; do
  pid=$serve_pid; [ "$t" = native ] && pid=$native_pid
  "$oha" --no-tui -n 2000 -c 4 "$(url "$t")" > /dev/null
  "$oha" --no-tui -z "$((secs + 2))s" -c "$c" -w "$(url "$t")" > "$out/$t.oha.txt" &
  load=$!
  sleep 1
  # perf's own stderr (lost samples and the like) goes with the target's summary.
  $PERF record -q -F "$hz" --call-graph "dwarf,$stack" -p "$pid" -o "$work/perf.data" \
    -- sleep "$secs" > /dev/null 2> "$out/$t.perf-record.txt"
  wait "$load"
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/$t.oha.txt")
  $PERF script -i "$work/perf.data" -F comm,tid,ip,sym,dso --no-inline 2> /dev/null > "$work/script.txt"
  {
    echo "== $t, c=$c: $rps req/s; perf at $hz Hz over $secs s"
    python3 scripts/lib/perf_centres.py "$work/script.txt" "$hz" \
      "$(awk -v r="$rps" -v s="$secs" 'BEGIN {print r * s}')"
  } | tee "$out/$t.centres.txt"
  [ -n "${KEEP_SCRIPT:-}" ] && xz -T0 -c "$work/script.txt" > "$out/$t.script.txt.xz"
done
