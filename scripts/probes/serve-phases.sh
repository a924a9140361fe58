#!/usr/bin/env bash
# Where a `gpuhost serve` request's time goes at one connection (issue #11): the http-stamp
# function sandboxed (the default) and trusted, side by side with the native handler, each
# `oha -c 1` for $SECS seconds, with the mean per phase from gpuhost_request_phase_seconds and,
# under each, every gpuhost:cuda host call's count per request and mean µs per call
# (gpuhost_host_call_seconds_total).
# Runs on the GPU machine from the packed .gpu/ (gpuhost, oha, guests); carry [".gpu"].
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
gpu=$PWD/.gpu; oha=$gpu/bin/oha; secs=${SECS:-3}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
"$gpu/bin/gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:18181 > "$work/serve.out" 2> "$work/serve.err" &
"$gpu/bin/gpuhost" bench --native-http 127.0.0.1:18182 --bundle crates/gpuhost/bundles/stamp-a > "$work/native.out" 2>&1 &
for _ in $(seq 100); do curl -sf http://127.0.0.1:18181/sandboxed > /dev/null && curl -sf http://127.0.0.1:18182/stamp > /dev/null && break; sleep 0.1; done
source scripts/lib/oha.sh
for target in native sandboxed trusted; do
  url=http://127.0.0.1:18181/$target; [ $target = native ] && url=http://127.0.0.1:18182/stamp
  "$oha" --no-tui -n 2000 -c 4 "$url" > /dev/null
  curl -s http://127.0.0.1:18181/metrics > "$work/before.txt"
  report=$("$oha" --no-tui -z "${secs}s" -c 1 -w "$url")
  line="$(oha_rps "$report") req/s p50=$(oha_us "$report" 50.00%)us p99=$(oha_us "$report" 99.00%)us"
  printf '%-10s %s' "$target" "$line"
  if [ $target != native ]; then
    curl -s http://127.0.0.1:18181/metrics > "$work/after.txt"
    printf ' %s' "$(python3 scripts/lib/phase_means.py $target "$work/before.txt" "$work/after.txt" --calls)"
  fi
  echo
done
curl -s http://127.0.0.1:18181/metrics | grep -E "sandbox_kept|live_buffers"
