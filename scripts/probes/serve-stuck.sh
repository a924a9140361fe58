#!/usr/bin/env bash
# Whether `gpuhost serve`'s sandbox pool keeps up under load (issue #11): the sandboxed
# http-stamp function under `oha -c C` for each C in $CS (16 64), with the pool's kept and
# pending pairs and live buffers after each, then all thread stacks by cuda-gdb (the image has no
# gdb) once the load has stopped: a pool whose pending count stays up while idle shows here
# which thread is stuck, and where. Runs on the GPU machine from the packed .gpu/; carry [".gpu"].
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
gpu=$PWD/.gpu; out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
source scripts/probes/stamp-repo.sh
stamp_server 18184 "$out/serve-stuck.log" '[serve]\nmax_concurrency = 128\nmax_queue = 1024\n'
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
pool() { curl -s http://127.0.0.1:18184/metrics | grep -E 'sandbox_(kept|pending)\{function="sandboxed|live_buffers\{' | awk '{printf "%s=%s ", $1, $2}'; echo; }
for c in ${CS:-16 64}; do
  echo "c=$c: $("$gpu/bin/oha" --no-tui -z "${SECS:-4}s" -c "$c" http://127.0.0.1:18184/sandboxed | grep -E 'Requests/sec' | awk '{print $NF}') req/s"
  echo "  right after: $(pool)"; sleep 1; echo "  1 s later:   $(pool)"
done
timeout 60 cuda-gdb -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 25" > "$out/serve-stuck-stacks.txt" 2>&1
# The threads of ours that are not tokio workers parked or idle: their top frames.
awk '/^Thread /{name=$0; n=0} /^#/{ if (n++ < 8) print name " | " $0 }' "$out/serve-stuck-stacks.txt" \
  | grep -E 'sandbox|watchdog|complet|gpuhost-' | cut -c1-220 | head -60
