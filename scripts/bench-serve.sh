#!/usr/bin/env bash
# Benchmark of `gpuhost serve` (bench/RESULTS.md): a small-kernel function (http-stamp: alloc +
# zero 32 words, launch `stamp`, download, answer hex) over HTTP/1.1 keep-alive with oha at 1, 16
# and 64 connections, against a native axum handler doing the same gpuhost work in process
# (`gpuhost bench --native-http`); cold start of a new version (load → first response: PTX JIT
# and cubin, compile cached and not); and swaps under load (non-200 count, p99 against steady).
# Native and serve are measured alternately, ROUNDS rounds per connection count of
# BENCH_SECS / ROUNDS each (native first in odd rounds, serve first in even ones), and the ratios
# reported are the medians of the rounds' ratios, each round's listed: a lease's throughput
# swings between runs (native alone served 79k and 116k req/s at 16 connections in two runs of
# one H200 lease), so both sides of a ratio must see the same machine state.
# Runs on the GPU machine from the packed .gpu/ (scripts/gpu-pack.sh: gpuhost, oha, guests);
# every request goes to 127.0.0.1. Output: $OUT/serve-bench/*.json (native-c16-r2.json: round 2
# of native at 16 connections) and a summary table. A call script that archives only
# $OUT/logs (gpu_call_end, scripts/lib/gpu-bin.sh) runs it with OUT=$OUT/logs, or its JSON stays
# behind (session 58's call1 kept only the summary). Env: BENCH_SECS (10: per side and connection
# count, all rounds), ROUNDS (3), SWAP_SECS (2 × BENCH_SECS), GPU_DIR (.gpu), GPUHOST_DRIVER
# (nvidia; softcuda to try it on a machine without a GPU).
#   device tool: run  command="bash scripts/bench-serve.sh"  carry=[".gpu"]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-bin.sh
out="${OUT:-/tmp/out}/serve-bench"; mkdir -p "$out"
gpu="${GPU_DIR:-$PWD/.gpu}"; bin="$gpu/bin"; gpuhost="$bin/gpuhost"; oha="$bin/oha"
secs="${BENCH_SECS:-10}"; rounds="${ROUNDS:-3}"
# Each side's BENCH_SECS per connection count is split into the rounds, so the whole run takes
# as long as with one run per side (scripts/gpu.sh gives it 70 s at BENCH_SECS=3).
round_ms=$((secs * 1000 / rounds))
swap_secs="${SWAP_SECS:-$((2 * secs))}"
export GPUHOST_DRIVER="${GPUHOST_DRIVER:-nvidia}" SOFTCUDA_LIB="$gpu/lib/libsoftcuda.so"
[ -x "$oha" ] || { echo "no $oha: run scripts/gpu-pack.sh (it installs oha) first"; exit 1; }
if "$oha" --help | grep -q -- '--output-format'; then json=(--output-format json); else json=(--json); fi
# -w: at the end of a -z run, wait for the requests in flight. Without it oha aborts them and
# counts each as an error ("aborted due to deadline": exactly one per connection), which the
# 2026-12-01 H200 run reported as 16 failed requests during swaps.
json+=(-w)

work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# The repository: stamp (bundle with an sm_90 cubin and PTX) and stamp-jit (PTX only); both are
# sandboxed functions, so both load their PTX rewritten by the sandbox (docs/ISOLATION.md).
mkdir -p "$work/repo/stamp/bundle" "$work/repo/stamp-jit/bundle"
cp "$gpu"/guests/http_stamp.wasm "$work/repo/stamp/function.wasm"
cp "$gpu"/guests/http_stamp.wasm "$work/repo/stamp-jit/function.wasm"
cp crates/gpuhost/bundles/stamp-a/* "$work/repo/stamp/bundle/"
cp crates/gpuhost/bundles/stamp-a/stamp.ptx "$work/repo/stamp-jit/bundle/"
printf 'name = "stamp-jit"\n[[module]]\nname = "stamp"\nptx = "stamp.ptx"\n' > "$work/repo/stamp-jit/bundle/manifest.toml"
for f in stamp stamp-jit; do
  printf '[serve]\nmax_concurrency = 128\nmax_queue = 1024\n' > "$work/repo/$f/function.toml"
done

# Waits for "listening on http://ADDR" in $1.out; echoes ADDR.
addr_of() {
  for _ in $(seq 1 600); do
    a=$(sed -n 's|^listening on http://||p' "$1.out")
    [ -n "$a" ] && { echo "$a"; return 0; }
    sleep 0.1
  done
  echo "did not start: $(cat "$1.err")" >&2; return 1
}

t0=$(date +%s.%N)
"$gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:0 --log-json \
  > "$out/serve.out" 2> "$out/serve.err" & pids+=($!)
serve=$(addr_of "$out/serve") || exit 1
curl -sf "http://$serve/stamp" > /dev/null
t1=$(date +%s.%N)
"$gpuhost" bench --native-http 127.0.0.1:0 --bundle crates/gpuhost/bundles/stamp-a \
  > "$out/native.out" 2> "$out/native.err" & pids+=($!)
native=$(addr_of "$out/native") || exit 1
echo "process start → first response (compile + context + bundle): $(awk "BEGIN{print $t1 - $t0}") s" > "$out/cold.txt"
grep '"published"' "$out/serve.err" >> "$out/cold.txt"

for addr in "$native" "$serve"; do
  "$oha" --no-tui -n 3000 -c 16 "http://$addr/stamp" > /dev/null    # warm-up
done
# The serve scrapes around each connection count take in all its serve rounds (native's rounds
# between them send serve nothing).
for c in 1 16 64; do
  curl -s "http://$serve/metrics" > "$out/metrics-before-c$c.txt"
  for r in $(seq 1 "$rounds"); do
    order="native serve"; [ $((r % 2)) = 0 ] && order="serve native"
    for target in $order; do
      addr=$native; [ $target = serve ] && addr=$serve
      "$oha" --no-tui "${json[@]}" -z "${round_ms}ms" -c "$c" "http://$addr/stamp" > "$out/$target-c$c-r$r.json"
    done
  done
  curl -s "http://$serve/metrics" > "$out/metrics-after-c$c.txt"
done

# Cold start of a new version, load → first response: same component (compile cached) with a new
# bundle, cubin and PTX JIT.
for f in stamp stamp-jit; do
  for i in 1 2 3; do
    s=$(date +%s.%N)
    load=$(curl -s -X POST "http://$serve/v2/repository/models/$f/load")
    curl -sf "http://$serve/$f" > /dev/null
    e=$(date +%s.%N)
    echo "$f load $i: load→first response $(awk "BEGIN{print $e - $s}") s; $load" >> "$out/cold.txt"
  done
done

# Swaps under load: 16 connections for swap_secs (2 × BENCH_SECS) while the bundle alternates every second.
"$oha" --no-tui "${json[@]}" -z "${swap_secs}s" -c 16 "http://$serve/stamp" > "$out/serve-swaps-c16.json" &
loadgen=$!
sleep 1
for i in $(seq 1 $((swap_secs - 2))); do
  b=stamp-b; [ $((i % 2)) = 0 ] && b=stamp-a
  cp crates/gpuhost/bundles/$b/* "$work/repo/stamp/bundle/"
  curl -s -w ' %{time_total}s\n' -X POST "http://$serve/v2/repository/models/stamp/load" >> "$out/swaps.txt"
  sleep 1
done
wait $loadgen
curl -s "http://$serve/metrics" > "$out/metrics.txt"

# Summary (python3 where present; the JSON files are the data either way).
if command -v python3 > /dev/null; then
  python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, sys, pathlib, statistics
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
sys.path.insert(0, "scripts/lib")
from phase_means import PHASES, call_means, duration_mean, means, quantiles, respond_cpu_mean
def load(name):
    d = json.loads((out / name).read_text())
    s, p = d["summary"], d.get("latencyPercentiles", {})
    codes = d.get("statusCodeDistribution", {})
    errors = d.get("errorDistribution", {})
    bad = sum(v for k, v in codes.items() if k != "200") + sum(errors.values())
    if errors:
        print(f"{name}: errors {errors}, status codes {codes}", file=sys.stderr)
    return s["requestsPerSec"], p.get("p50", 0) * 1e3, p.get("p99", 0) * 1e3, bad
def ratio(a, b):
    return a / b if b else float("nan")
med = statistics.median
print(f"Medians of {rounds} alternating rounds (req/s, p50, p99 of each side; ratio and p99 ratio:"
      " the median of the rounds' own ratios, serve / native)")
print("| connections | native req/s | serve req/s | ratio | native p50/p99 ms | serve p50/p99 ms | p99 ratio | rounds: ratio (p99 ratio) |")
print("|---|---|---|---|---|---|---|---|")
steady_p99, bad = {}, 0
for c in (1, 16, 64):
    ns = [load(f"native-c{c}-r{r}.json") for r in range(1, rounds + 1)]
    ss = [load(f"serve-c{c}-r{r}.json") for r in range(1, rounds + 1)]
    bad += sum(x[3] for x in ns + ss)
    n = [med(x[i] for x in ns) for i in range(3)]
    s = [med(x[i] for x in ss) for i in range(3)]
    steady_p99[c] = s[2]
    per = [(ratio(b[0], a[0]), ratio(b[2], a[2])) for a, b in zip(ns, ss)]
    each = ", ".join(f"{q:.2f} ({p:.2f})" for q, p in per)
    print(f"| {c} | {n[0]:.0f} | {s[0]:.0f} | {med(q for q, _ in per):.2f} | {n[1]:.3f}/{n[2]:.3f} "
          f"| {s[1]:.3f}/{s[2]:.3f} | {med(p for _, p in per):.2f} | {each} |")
print(f"\nnon-200 or errors over all rounds: {bad}")
print("\nThe latency's shape at the client, µs (oha's percentiles, the median of each over the rounds): where a"
      " side's tail starts")
tails = ("p50", "p75", "p90", "p95", "p99", "p99.9")
print("| connections | side | " + " | ".join(tails) + " |")
print("|---|---|" + "---:|" * len(tails))
for c in (1, 16, 64):
    for side in ("native", "serve"):
        pct = [json.loads((out / f"{side}-c{c}-r{r}.json").read_text()).get("latencyPercentiles", {})
               for r in range(1, rounds + 1)]
        print(f"| {c} | {side} | " + " | ".join(f"{med((p.get(k) or 0) for p in pct) * 1e6:.0f}" for k in tails) + " |")
sw = load("serve-swaps-c16.json")
# Each connection count's /metrics scrapes, before and after its rounds, read once.
scrapes = {c: tuple((out / f"metrics-{when}-c{c}.txt").read_text() for when in ("before", "after"))
           for c in (1, 16, 64)}
print("\nserve: µs per request by phase (gpuhost_request_phase_seconds over the requests, every serve round's at that count;"
      " setup, instantiate and sandbox of Stores made by requests that found no warm one; the warm_ phases, of Stores made"
      " ahead, and teardown, follow a response)")
print("| connections | setup | instantiate | sandbox | respond (handler start → head) | teardown | warm_setup | warm_instantiate | warm_sandbox |")
print("|---|---|---|---|---|---|---|---|---|")
for c in (1, 16, 64):
    m = means("stamp", *scrapes[c])
    print(f"| {c} | " + " | ".join(f"{m[p]:.1f}" for p in PHASES) + " |")
print("\nserve: where a request's time goes, mean µs (client: oha's mean over the serve rounds; server: gpuhost_request_duration_seconds,"
      " arrival in the handler → response handed to hyper; respond's run on a CPU: gpuhost_request_respond_cpu_seconds, the thread CPU"
      " time of the guest run's polls until its response; outside: the rest, i.e. the connection, epoll wake-up, hyper's read and write,"
      " and time waiting for a worker; native's whole request beside it)")
print("| connections | serve client | server | of which respond | respond's run on a CPU | outside the server's clock | native client |")
print("|---|---|---|---|---|---|---|")
for c in (1, 16, 64):
    client = statistics.mean(json.loads((out / f"serve-c{c}-r{r}.json").read_text())["summary"]["average"]
                             for r in range(1, rounds + 1)) * 1e6
    nat = statistics.mean(json.loads((out / f"native-c{c}-r{r}.json").read_text())["summary"]["average"]
                          for r in range(1, rounds + 1)) * 1e6
    server = duration_mean("stamp", *scrapes[c])
    m = means("stamp", *scrapes[c])
    cpu = respond_cpu_mean("stamp", *scrapes[c])
    print(f"| {c} | {client:.1f} | {server:.1f} | {m['respond']:.1f} | {cpu:.1f} | {client - server:.1f} | {nat:.1f} |")
print("\nserve: gpuhost:cuda host calls, per request × mean µs per call (gpuhost_host_call_seconds_total)")
for c in (1, 16, 64):
    calls = call_means("stamp", *scrapes[c])
    print(f"- c={c}: " + ", ".join(f"{k} {n:.2f}×{us:.1f}" for k, n, us in calls))
print("\nserve: the spread, µs p50 / p90 / p99 (interpolated in the histograms' buckets, as Prometheus's histogram_quantile;"
      " respond: gpuhost_request_phase_seconds; each call: gpuhost_host_call_duration_seconds)")
for c in (1, 16, 64):
    before, after = scrapes[c]
    rows = [("respond", quantiles("gpuhost_request_phase_seconds", "stamp", "phase", "respond", before, after)),
            ("respond's run on a CPU", quantiles("gpuhost_request_respond_cpu_seconds", "stamp", "function", "stamp", before, after))]
    for k, _, _ in call_means("stamp", before, after):
        rows.append((k, quantiles("gpuhost_host_call_duration_seconds", "stamp", "call", k, before, after)))
    print(f"- c={c}: " + ", ".join(f"{k} " + "/".join(f"{v:.1f}" for v in qs) for k, qs in rows))
print(f"\nswaps under load (c=16): {sw[0]:.0f} req/s, p99 {sw[2]:.3f} ms vs steady {steady_p99[16]:.3f} ms "
      f"(median of the rounds; {ratio(sw[2], steady_p99[16]):.2f}x), non-200 or errors: {sw[3]}")
PY
fi
cat "$out/cold.txt"; echo "swap load times:"; cat "$out/swaps.txt" | head -30
