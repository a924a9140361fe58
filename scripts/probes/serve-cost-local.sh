#!/usr/bin/env bash
# serve's CPU cost per request where there is no GPU and perf has no hardware counters (this
# 2-core VM, softcuda): serve-floor.sh's repository (hello, ladder, tladder; native beside it)
# served by each GPUHOST given, every target loaded in turn by `wrk -t1 -c $C -d $SECS` while
# `perf stat -p` counts the server's software events (task-clock, page faults, context
# switches) and /proc its user and kernel time; then per target and build the server's CPU µs
# (all threads, and user / kernel), page faults and context switches per request, medians of
# $ROUNDS rounds, builds alternating within each round, and each later build's CPU per request
# against the first's as the median of the rounds' ratios. On a shared 2-core machine these move
# by tens of percent with the other load (session 40: two builds 17% apart in instructions had
# per-round ratios from 0.58 to 1.34): compare instruction counts where they disagree. With
# STRACE=1, one more short run per target under `strace -c -f` gives the syscalls per request by
# name (strace slows the server: counts only). Needs wrk (Debian's `wrk`).
#   bash scripts/probes/serve-cost-local.sh GPUHOST [GPUHOST ...]
# Env: T (the target folder with release/libsoftcuda.so and guests/: $CARGO_TARGET_DIR, else
# target), TARGETS ("native hello ladder0 tladder0 ladder3 tladder3"), C (4), SECS (4),
# ROUNDS (3), STRACE, TASKSET (a CPU list to pin the servers to; wrk then runs on the others).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 GPUHOST [GPUHOST ...]" >&2; exit 2; }
T=${T:-${CARGO_TARGET_DIR:-target}}
export GPUHOST_DRIVER=softcuda SOFTCUDA_LIB=$T/release/libsoftcuda.so
targets=${TARGETS:-native hello ladder0 tladder0 ladder3 tladder3}
c=${C:-4}; secs=${SECS:-4}; rounds=${ROUNDS:-3}
all=(); work=$(mktemp -d)
trap 'for p in "${all[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
source scripts/probes/floor-servers.sh
# One server pair per build, each on its own ports (floor_servers' fixed ones, moved).
declare -A serve_of native_of
for i in $(seq $#); do
  bin=$(realpath "${!i}")
  gpu=$work/gpu$i; mkdir -p "$gpu/bin" "$gpu/guests"
  ln -s "$bin" "$gpu/bin/gpuhost"
  cp "$T/guests/wasm32-wasip2/release/"http_{hello,ladder,stamp}.wasm "$gpu/guests/" || exit 1
  pids=(); mkdir -p "$work/srv$i"
  # Each build's pair on ports of its own (floor_servers' floor_port).
  floor_port=$((18600 + 2 * i))
  floor_servers "$work/srv$i"
  all+=("${pids[@]}")
  [ -n "${TASKSET:-}" ] && for p in "${pids[@]}"; do taskset -a -p -c "$TASKSET" "$p" > /dev/null; done
  serve_of[$i]=$serve_pid; native_of[$i]=$native_pid
done
# url TARGET for build I.
url_of() { local floor_port=$((18600 + 2 * $1)); url "$2"; }
for i in $(seq $#); do
  for t in $targets; do wrk -t1 -c "$c" -d 1s "$(url_of "$i" "$t")" > /dev/null; done
done
# One line per run: TARGET BUILD REQUESTS, then per request CPU_US FAULTS SWITCHES USER_US SYS_US.
for r in $(seq "$rounds"); do
  for t in $targets; do
    for i in $(seq $#); do
      pid=${serve_of[$i]}; [ "$t" = native ] && pid=${native_of[$i]}
      perf stat -x, -e task-clock,page-faults,context-switches -p "$pid" -o "$work/stat" -- sleep "$secs" &
      stat=$!
      read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
      wrk -t1 -c "$c" -d "${secs}s" "$(url_of "$i" "$t")" > "$work/wrk"
      read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
      wait "$stat"
      n=$(awk '/requests in/ {print $1}' "$work/wrk")
      bad=$(awk '/Non-2xx/ {print $NF}' "$work/wrk")
      [ -n "$bad" ] && echo "WARNING: $t build $i: $bad answers other than 2xx" >&2
      awk -F, -v t="$t" -v i="$i" -v n="$n" -v user=$((u1 - u0)) -v sys=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" '
        $3 == "task-clock" {cpu = $1 * 1000} $3 == "page-faults" {pf = $1} $3 == "context-switches" {cs = $1}
        END {printf "%s %s %d %.1f %.2f %.2f %.1f %.1f\n", t, i, n, cpu / n, pf / n, cs / n, user / hz / n * 1e6, sys / hz / n * 1e6}' "$work/stat"
    done
  done
done | tee "$work/runs.txt"
python3 - "$work/runs.txt" "$@" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, i, n, cpu, pf, cs, user, sys_ = line.split()
    runs[(t, int(i))].append((int(n), float(cpu), float(pf), float(cs), float(user), float(sys_)))
builds = sys.argv[2:]
print("| target | build | requests/s (median) | CPU µs/request | of which user / kernel | page faults/request | context switches/request |")
print("|---|---|---:|---:|---:|---:|---:|")
for t in dict.fromkeys(t for t, _ in runs):
    for i, b in enumerate(builds, 1):
        rs = runs[(t, i)]
        med = lambda k: statistics.median(x[k] for x in rs)
        print(f"| {t} | {b} | {med(0) / float(__import__('os').environ.get('SECS', 4)):.0f} | {med(1):.1f} | {med(4):.1f} / {med(5):.1f} | {med(2):.2f} | {med(3):.2f} |")
# Each later build against the first, round by round (its runs are seconds apart, so a change in
# the machine's other load falls on both): the median of the rounds' ratios of CPU per request.
for i, b in enumerate(builds[1:], 2):
    for t in dict.fromkeys(t for t, _ in runs):
        ratios = sorted(x[1] / y[1] for x, y in zip(runs[(t, i)], runs[(t, 1)]))
        print(f"{t}: {b} / {builds[0]}, CPU per request, median of {len(ratios)} rounds' ratios: {statistics.median(ratios):.3f} (range {ratios[0]:.3f} to {ratios[-1]:.3f})")
EOF
if [ -n "${STRACE:-}" ]; then
  for t in $targets; do
    for i in $(seq $#); do
      pid=${serve_of[$i]}; [ "$t" = native ] && pid=${native_of[$i]}
      timeout 5 strace -c -f -p "$pid" -o "$work/strace" &
      st=$!; sleep 0.5
      wrk -t1 -c "$c" -d 3s "$(url_of "$i" "$t")" > "$work/wrk"
      wait "$st"
      n=$(awk '/requests in/ {print $1}' "$work/wrk")
      echo "== syscalls per request: $t, build $i (${!i}), $n requests under strace"
      # strace -c's rows: % time, seconds, usecs/call, calls, [errors,] syscall.
      awk -v n="$n" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ {printf "  %-20s %.2f\n", $NF, $4 / n}' "$work/strace" | sort -k2 -rn | head -16
    done
  done
fi
