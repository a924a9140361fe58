#!/usr/bin/env bash
# Why a fresh sandboxed Store's first synchronize costs ~130 µs on the H200 (issue #11, #9):
# the http-stamp function served sandboxed and trusted, one request at a time under Nsight
# Compute, which gives each `stamp` kernel's own GPU time. If the sandboxed kernel itself is slow
# (page faults on the control block, say) it shows here; if not, the time is on the host side.
# Runs on the GPU machine from the packed .gpu/ (gpuhost, guests); carry [".gpu"].
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
gpu=$PWD/.gpu; n=${N:-40}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo"
# The sandbox keeps kernel names: requests go sandboxed first, so launch order tells them apart.
ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  -o "$work/prof" --force-overwrite \
  "$gpu/bin/gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:18191 > "$work/serve.out" 2>&1 &
up=0; for _ in $(seq 300); do curl -sf http://127.0.0.1:18191/v2/health/ready > /dev/null && { up=1; break; }; sleep 0.2; done
echo "serve up=$up"
for f in sandboxed trusted; do
  for i in $(seq "$n"); do curl -s -o /dev/null -w "%{time_total}\n" "http://127.0.0.1:18191/$f"; done > "$work/curl-$f.txt"
  sort -n "$work/curl-$f.txt" | awk -v f=$f '{ a[NR] = $1 } END { printf "%s: %d requests under ncu, median %.1f ms\n", f, NR, a[int(NR/2)+1] * 1000 }'
done
pkill -INT -f "gpuhost serve --repository $work/repo"; wait
tail -5 "$work/serve.out"
ncu --import "$work/prof.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum > "${OUT:-$work}/first-sync-ncu.csv" 2>&1
# Requests went sandboxed first, then trusted; each request launches one stamp.
python3 - "${OUT:-$work}/first-sync-ncu.csv" "$n" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
name, dur = rows[head].index("Kernel Name"), rows[head].index("gpu__time_duration.sum")
# The row after the header holds each column's unit; give every time in microseconds.
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[rows[head + 1][dur]]
ks = [(r[name], float(r[dur]) * scale) for r in rows[head + 2:] if len(r) > dur and "stamp" in r[name]]
n = int(sys.argv[2])
print(f"stamp kernels seen: {len(ks)} (names: {sorted(set(k for k, _ in ks))})")
for label, part in (("sandboxed", ks[:n]), ("trusted", ks[n:2 * n])):
    t = [d for _, d in part]
    if t:
        print(f"{label:9} stamp GPU time: median {statistics.median(t):.1f} us, first {t[0]:.1f}, max {max(t):.1f}, min {min(t):.1f}")
PY
