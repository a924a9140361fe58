#!/usr/bin/env bash
# Who completes a `gpuhost serve` request's launches (issue #11: a sandboxed request's drain took
# 5-12 µs longer than a trusted one's on the H200, and drain-arenas.cu found no GPU-side cause):
# the request's own await, querying its batch's event on its thread, or the device's completion
# thread, a hand-off the request waits for. The http-stamp function sandboxed and trusted
# (stamp-repo.sh), each under `oha -c C` for $SECS seconds at each C of $CS, one after the
# other on one server; per window: req/s, launches and batches completed by poll per request
# (gpuhost_device_*), and the mean µs of stream.read-after.
# Runs on the GPU machine from the packed .gpu/ (gpuhost, oha, guests); carry [".gpu"].
#   bash scripts/probes/serve-by-poll.sh
# Env: SECS (3), CS ("1 16"), GPUHOST_DRIVER (nvidia).
set -uo pipefail
cd "$(dirname "$0")/../.."
# GPU_DIR: a folder laid out as .gpu/ (bin/gpuhost, bin/oha, guests/), to run it elsewhere.
[ -n "${GPU_DIR:-}" ] || source scripts/lib/gpu-bin.sh
gpu=${GPU_DIR:-$PWD/.gpu}; oha=$gpu/bin/oha; secs=${SECS:-3}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
source scripts/probes/stamp-repo.sh
stamp_server 18191 /tmp/serve-by-poll.log '[serve]\nmax_concurrency = 128\n'
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
# The sum of a metric's samples whose line matches $2 (all of them without).
total() { grep -E "^$1(\{| )" "$3" | grep -E "${2:-.}" | awk '{s += $NF} END {printf "%.6f", s}'; }
printf '%-10s %4s %9s %14s %20s %18s\n' function c req/s launches/req by-poll-batches/req read-after-us
for c in ${CS:-1 16}; do
  for f in sandboxed trusted sandboxed trusted; do
    url=http://127.0.0.1:18191/$f
    "$oha" --no-tui -n 1000 -c 4 "$url" > /dev/null
    curl -s http://127.0.0.1:18191/metrics > "$work/b.txt"
    rps=$("$oha" --no-tui -z "${secs}s" -c "$c" -w "$url" | awk '/Requests\/sec/ {printf "%.0f", $2}')
    curl -s http://127.0.0.1:18191/metrics > "$work/a.txt"
    sel="function=\"$f\""
    python3 - "$f" "$c" "$rps" \
      "$(total gpuhost_requests_total "$sel" "$work/b.txt")" "$(total gpuhost_requests_total "$sel" "$work/a.txt")" \
      "$(total gpuhost_device_launches_total "" "$work/b.txt")" "$(total gpuhost_device_launches_total "" "$work/a.txt")" \
      "$(total gpuhost_device_batches_completed_by_poll_total "" "$work/b.txt")" "$(total gpuhost_device_batches_completed_by_poll_total "" "$work/a.txt")" \
      "$(total gpuhost_host_call_seconds_total "$sel.*read-after" "$work/b.txt")" "$(total gpuhost_host_call_seconds_total "$sel.*read-after" "$work/a.txt")" <<'EOF'
import sys
f, c, rps, *v = sys.argv[1:]
v = [float(x) for x in v]
req = max(v[1] - v[0], 1)
print(f"{f:<10} {c:>4} {rps:>9} {(v[3]-v[2])/req:14.3f} {(v[5]-v[4])/req:20.3f} {(v[7]-v[6])/req*1e6:18.1f}")
EOF
  done
done
