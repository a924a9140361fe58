#!/usr/bin/env bash
# serve's floor (issue #11: throughput ≥ 0.8× the native handler): the native handler (`gpuhost
# bench --native-http`, its GPU work in process), http-hello (a function that launches nothing:
# a fresh Store, the component call and wasi:http alone) and http-stamp sandboxed (the
# benchmark's function), each under `oha -z SECS -c C` for each C of $CS, $ROUNDS rounds with the
# targets alternating; then per connection count and target the mean req/s, its ratio to
# native, the median of the rounds' p50 and p99, and the median of the server's CPU per request
# (its process's user + system time over the run, all threads: the serving process for every
# target but native). Targets ($TARGETS): native, hello, sandboxed, trusted, and ladder0 …
# ladder5, http-ladder sandboxed cut after that step (its header lists them: each gpuhost:cuda
# call's share of a request), and tladder0 … tladder5, the same trusted. With METRICS=DIR,
# serve's /metrics is saved after each run as DIR/C-TARGET-ROUND.prom (scripts/probes/prom-diff.py
# says what one run added). With STACKS="TARGET ..." and STACKS_DIR, serve's threads are sampled by
# cuda-gdb 1 s into each run of those targets (DIR/C-TARGET-ROUND.txt;
# scripts/probes/stacks-summary.py reads them): give such runs SECS of 5 or more, as the attach
# stops the server for a while.
# Runs on the GPU machine from the packed .gpu/ (gpuhost, oha, guests); carry [".gpu"].
#   bash scripts/probes/serve-floor.sh
# Env: SECS (3), ROUNDS (2), CS ("1 16 64"), TARGETS ("native hello sandboxed"), GPUHOST_DRIVER
# (nvidia), GPU_DIR (a folder laid out as .gpu/, to run it elsewhere), THREADS (set: the
# server's CPU per request by thread name too, with its kernel share and context switches).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -n "${GPU_DIR:-}" ] || source scripts/lib/gpu-bin.sh
gpu=${GPU_DIR:-$PWD/.gpu}; oha=$gpu/bin/oha; secs=${SECS:-3}; rounds=${ROUNDS:-2}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
targets=${TARGETS:-native hello sandboxed}
source scripts/probes/floor-servers.sh
floor_servers "$work"
for t in $targets; do "$oha" --no-tui -n 2000 -c 4 "$(url "$t")" > /dev/null; done
# The server's CPU time (user + system, all its threads) in clock ticks, from /proc.
source scripts/lib/proc-cpu.sh
# One line per run: C TARGET REQ/S P50_MS P99_MS CPU_US_PER_REQUEST.
for c in ${CS:-1 16 64}; do
  for r in $(seq "$rounds"); do
    for t in $targets; do
      sampler=
      if [[ " ${STACKS:-} " == *" $t "* ]]; then
        mkdir -p "$STACKS_DIR"
        (sleep 1; timeout 60 cuda-gdb -p "$serve_pid" -batch -ex "set pagination off" \
          -ex "thread apply all bt 40" > "$STACKS_DIR/$c-$t-$r.txt" 2>&1) & sampler=$!
      fi
      pid=$serve_pid; [ "$t" = native ] && pid=$native_pid
      before=$(proc_cpu "$pid"); [ -n "${THREADS:-}" ] && proc_threads "$pid" > "$work/t0"
      "$oha" --no-tui -z "${secs}s" -c "$c" -w "$(url "$t")" > "$work/oha.txt"
      after=$(proc_cpu "$pid")
      rps=$(awk '/Requests\/sec/ {print $2}' "$work/oha.txt")
      if [ -n "${THREADS:-}" ]; then
        proc_threads "$pid" > "$work/t1"
        awk -v c="$c" -v t="$t" -v n="$(awk -v r="$rps" -v s="$secs" 'BEGIN {print r * s}')" -v hz="$CLK_TCK" \
          'NR == FNR {a[$1] = $2; k[$1] = $4; w[$1] = $5; next}
           {d = $2 - a[$1]; if (d > 0 && n > 0) printf "%s %s %s %.1f %.1f %.2f\n", c, t, $1, d / hz / n * 1e6, ($4 - k[$1]) / hz / n * 1e6, ($5 - w[$1]) / n}' \
          "$work/t0" "$work/t1" >> "$work/threads.txt"
      fi
      [ -n "$sampler" ] && wait "$sampler"
      [ -n "${METRICS:-}" ] && mkdir -p "$METRICS" && curl -s http://127.0.0.1:18291/metrics > "$METRICS/$c-$t-$r.prom"
      # oha prints "50.00% in 0.1050 ms" (or secs, or µs, by its version and the value).
      awk -v c="$c" -v t="$t" -v r="$rps" -v cpu="$(proc_us_per_request $((after - before)) "$rps" "$secs")" \
        'function ms(v, u) { return u == "secs" ? v * 1000 : (u == "ms" ? v : v / 1000) }
        /^ +50\.00% in/ {p50 = ms($3, $4)} /^ +99\.00% in/ {p99 = ms($3, $4)}
        END {printf "%s %s %s %.3f %.3f %s\n", c, t, r, p50, p99, cpu}' "$work/oha.txt"
    done
  done
done > "$work/runs.txt"
cat "$work/runs.txt"
python3 - "$work/runs.txt" $targets <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c, t, r, p50, p99, cpu = line.split()
    runs[(int(c), t)].append((float(r), float(p50), float(p99), float(cpu)))
print("| connections | target | req/s (mean of rounds) | × native | p50 ms | p99 ms | server CPU µs/request |")
print("|---|---|---|---|---|---|---|")
for c in sorted({c for c, _ in runs}):
    base = [r for r, *_ in runs[(c, "native")]]
    native = statistics.mean(base) if base else float("nan")
    for t in sys.argv[2:]:
        rs = runs[(c, t)]
        rps = statistics.mean(r for r, *_ in rs)
        p50 = statistics.median(x[1] for x in rs)
        p99 = statistics.median(x[2] for x in rs)
        cpu = statistics.median(x[3] for x in rs)
        print(f"| {c} | {t} | {rps:.0f} | {rps / native:.2f} | {p50:.3f} | {p99:.3f} | {cpu:.1f} |")
EOF
# THREADS: the server's CPU µs per request by thread name, median of the rounds.
if [ -n "${THREADS:-}" ] && [ -s "$work/threads.txt" ]; then
  python3 - "$work/threads.txt" <<'EOF2'
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c, t, name, us, sys_us, switches = line.split()
    by[(int(c), t, name)].append((float(us), float(sys_us), float(switches)))
print("| connections | target | per request by thread name (median of rounds): CPU µs (of which in the kernel), context switches |")
print("|---|---|---|")
order = list(dict.fromkeys(t for _, t, _ in by))
for c, t in sorted({(c, t) for c, t, _ in by}, key=lambda k: (k[0], order.index(k[1]))):
    rows = []
    for (cc, tt, n), v in by.items():
        if (cc, tt) == (c, t):
            rows.append(tuple(statistics.median(x[i] for x in v) for i in range(3)) + (n,))
    rows.sort(reverse=True)
    print(f"| {c} | {t} | " + ", ".join(f"{n} {us:.1f} ({ks:.1f}), {cs:.2f} cs" for us, ks, cs, n in rows) + " |")
EOF2
fi
