#!/usr/bin/env bash
# Benchmark of `gpuhost serve` (bench/RESULTS.md): a small-kernel function (http-stamp: alloc +
# zero 32 words, launch `stamp`, download, answer hex) over HTTP/1.1 keep-alive with oha at 1, 16
# and 64 connections, against a native axum handler doing the same gpuhost work in process
# (`gpuhost bench --native-http`); cold start of a new version (load → first response: PTX JIT
# and cubin, compile cached and not); and swaps under load (non-200 count, p99 against steady).
# Runs on the GPU machine from the packed .gpu/ (scripts/gpu-pack.sh: gpuhost, oha, guests);
# every request goes to 127.0.0.1. Output: $OUT/serve-bench/*.json and a summary table.
#   device tool: run  command="bash scripts/bench-serve.sh"  carry=[".gpu"]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-bin.sh
out="${OUT:-/tmp/out}/serve-bench"; mkdir -p "$out"
gpu="${GPU_DIR:-$PWD/.gpu}"; bin="$gpu/bin"; gpuhost="$bin/gpuhost"; oha="$bin/oha"
secs="${BENCH_SECS:-10}"
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

for target in native serve; do
  addr=$native; [ $target = serve ] && addr=$serve
  "$oha" --no-tui -n 3000 -c 16 "http://$addr/stamp" > /dev/null    # warm-up
  for c in 1 16 64; do
    [ $target = serve ] && curl -s "http://$addr/metrics" > "$out/metrics-before-c$c.txt"
    "$oha" --no-tui "${json[@]}" -z "${secs}s" -c "$c" "http://$addr/stamp" > "$out/$target-c$c.json"
    [ $target = serve ] && curl -s "http://$addr/metrics" > "$out/metrics-after-c$c.txt"
  done
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

# Swaps under load: 16 connections for 2×secs while the bundle alternates every second.
"$oha" --no-tui "${json[@]}" -z "$((2 * secs))s" -c 16 "http://$serve/stamp" > "$out/serve-swaps-c16.json" &
loadgen=$!
sleep 1
for i in $(seq 1 $((2 * secs - 2))); do
  b=stamp-b; [ $((i % 2)) = 0 ] && b=stamp-a
  cp crates/gpuhost/bundles/$b/* "$work/repo/stamp/bundle/"
  curl -s -w ' %{time_total}s\n' -X POST "http://$serve/v2/repository/models/stamp/load" >> "$out/swaps.txt"
  sleep 1
done
wait $loadgen
curl -s "http://$serve/metrics" > "$out/metrics.txt"

# Summary (python3 where present; the JSON files are the data either way).
if command -v python3 > /dev/null; then
  python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
sys.path.insert(0, "scripts/lib")
from phase_means import PHASES, call_means, means
def load(name):
    d = json.loads((out / name).read_text())
    s, p = d["summary"], d.get("latencyPercentiles", {})
    codes = d.get("statusCodeDistribution", {})
    errors = d.get("errorDistribution", {})
    bad = sum(v for k, v in codes.items() if k != "200") + sum(errors.values())
    if errors:
        print(f"{name}: errors {errors}, status codes {codes}", file=sys.stderr)
    return s["requestsPerSec"], p.get("p50", 0) * 1e3, p.get("p99", 0) * 1e3, bad
print("| connections | native req/s | serve req/s | ratio | native p50/p99 ms | serve p50/p99 ms | p99 ratio |")
print("|---|---|---|---|---|---|---|")
for c in (1, 16, 64):
    n, s = load(f"native-c{c}.json"), load(f"serve-c{c}.json")
    print(f"| {c} | {n[0]:.0f} | {s[0]:.0f} | {s[0]/n[0]:.2f} | {n[1]:.3f}/{n[2]:.3f} | {s[1]:.3f}/{s[2]:.3f} | {s[2]/n[2]:.2f} |")
sw, st = load("serve-swaps-c16.json"), load("serve-c16.json")
print("\nserve: mean µs per request by phase (gpuhost_request_phase_seconds, this run's requests only)")
print("| connections | setup | instantiate | sandbox (warm Store) | respond (handler start → head) | teardown |")
print("|---|---|---|---|---|---|")
for c in (1, 16, 64):
    m = means("stamp", (out / f"metrics-before-c{c}.txt").read_text(),
              (out / f"metrics-after-c{c}.txt").read_text())
    print(f"| {c} | " + " | ".join(f"{m[p]:.1f}" for p in PHASES) + " |")
print("\nserve: gpuhost:cuda host calls, per request × mean µs per call (gpuhost_host_call_seconds_total)")
for c in (1, 16, 64):
    calls = call_means("stamp", (out / f"metrics-before-c{c}.txt").read_text(),
                       (out / f"metrics-after-c{c}.txt").read_text())
    print(f"- c={c}: " + ", ".join(f"{k} {n:.2f}×{us:.1f}" for k, n, us in calls))
print(f"\nswaps under load (c=16): {sw[0]:.0f} req/s, p99 {sw[2]:.3f} ms vs steady {st[2]:.3f} ms "
      f"({sw[2]/st[2]:.2f}x), non-200 or errors: {sw[3]}")
PY
fi
cat "$out/cold.txt"; echo "swap load times:"; cat "$out/swaps.txt" | head -30
