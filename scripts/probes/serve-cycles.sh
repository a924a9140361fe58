#!/usr/bin/env bash
# Server CPU per request by kernel counters (issue #11: serve's CPU per request against the
# native handler's), where perf runs (softcuda; the GPU machine's image has no perf): the
# http-stamp function sandboxed and trusted (stamp-repo.sh) and the native handler (`gpuhost
# bench --native-http`), each under `oha -c C` for $SECS seconds at each C of $CS, while
# `perf stat --per-thread -p` counts the server process. Prints req/s and per request, in all
# and by thread name: CPU µs (perf's task-clock: neither this VM nor the GPU machine has
# hardware counters, so no cycles or cache misses), page faults, context switches, CPU
# migrations and syscalls (raw_syscalls). On a shared machine the CPU per request moves with
# the other load by 10-20% between runs: compare several runs, interleaved.
#   bash scripts/probes/serve-cycles.sh GPUHOST
# Env: OHA (target/oha/bin/oha), GUESTS (target/guests/wasm32-wasip2/release), SECS (3),
# CS ("1 2"), FNS ("native sandboxed trusted", and hello with HELLO), SOFTCUDA_LIB (the
# libsoftcuda.so to use), EVENTS (extra perf events, comma-separated), HELLO (above).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 GPUHOST" >&2; exit 2; }
export GPUHOST_DRIVER=softcuda
bin=$1; oha=${OHA:-target/oha/bin/oha}; secs=${SECS:-3}
gpu=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
# HELLO: a function component that launches nothing, served trusted at /hello (target "hello"):
# serve's floor per request without gpuhost:cuda.
if [ -n "${HELLO:-}" ]; then
  mkdir -p "$work/repo/hello" && cp "$HELLO" "$work/repo/hello/function.wasm"
  printf 'route = "/hello"\nsandbox = false\n[serve]\nmax_concurrency = 128\n' > "$work/repo/hello/function.toml"
fi
port=$((18600 + RANDOM % 300))
"$bin" serve --repository "$work/repo" --listen "127.0.0.1:$port" > "$work/serve.out" 2> "$work/serve.err" & serve_pid=$!
"$bin" bench --native-http "127.0.0.1:$((port + 1))" --bundle crates/gpuhost/bundles/stamp-a > "$work/native.out" 2>&1 & native_pid=$!
for _ in $(seq 200); do
  curl -sf "http://127.0.0.1:$port/sandboxed" > /dev/null && curl -sf "http://127.0.0.1:$((port + 1))/stamp" > /dev/null && break
  sleep 0.1
done
grep -h "instance allocation\|tokio runtime" "$work/serve.err"
events=task-clock,page-faults,context-switches,cpu-migrations,raw_syscalls:sys_enter${EVENTS:+,$EVENTS}
printf '%-10s %2s %8s  %s\n' target c req/s "per request, by thread name: CPU µs, page faults, context switches, migrations, syscalls"
for target in ${FNS:-native sandboxed trusted}; do
  url=http://127.0.0.1:$port/$target; pid=$serve_pid
  [ "$target" = native ] && { url=http://127.0.0.1:$((port + 1))/stamp; pid=$native_pid; }
  "$oha" --no-tui -n 1000 -c 2 "$url" > /dev/null
  for c in ${CS:-1 2}; do
    perf stat --per-thread -x, -e "$events" -p "$pid" -o "$work/stat.txt" -- sleep 100000 2> /dev/null & perf_pid=$!
    sleep 0.2
    "$oha" --no-tui -z "${secs}s" -c "$c" -w "$url" > "$work/oha.txt"
    # perf stops counting when its workload ends (a background job ignores SIGINT, and so would
    # perf's sleep): end the sleep, by its pid.
    kill $(pgrep -P $perf_pid) 2> /dev/null; wait $perf_pid 2> /dev/null
    n=$(awk '/\[200\] /{print $2}' "$work/oha.txt"); rps=$(awk '/Requests\/sec/{print $2}' "$work/oha.txt")
    # Lines "comm-tid,value,unit,event,...": summed by thread name (digits dropped) and in all.
    awk -F, -v t="$target" -v c="$c" -v n="${n:-0}" -v rps="$rps" '
      $2 ~ /^[0-9.]+$/ {
        name = $1; sub(/-[0-9]+$/, "", name); gsub(/[0-9]/, "", name)
        v[name, $4] += $2; v["all", $4] += $2; names[name] = 1
      }
      function row(k) {
        return sprintf("%s %.1f µs %.2f pf %.2f cs %.2f mig %.1f sys", k, v[k, "task-clock"] * 1000 / n,
          v[k, "page-faults"] / n, v[k, "context-switches"] / n, v[k, "cpu-migrations"] / n,
          v[k, "raw_syscalls:sys_enter"] / n)
      }
      END {
        if (n == 0) { print t, c, "no 200 answers"; exit }
        printf "%-10s %2d %8.0f  %s\n", t, c, rps, row("all")
        for (k in names) if (v[k, "task-clock"] * 1000 / n >= 1) printf "%24s%s\n", "", row(k)
      }' "$work/stat.txt"
  done
done
echo "(per request, counted over the whole server process while oha ran: 200 answers only)"
