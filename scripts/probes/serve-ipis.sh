#!/usr/bin/env bash
# What a `gpuhost serve` request costs the machine beyond its CPU time (issue #11's latency
# spread): per request, the interrupts between CPUs over the run (from /proc/interrupts, all
# CPUs: TLB shootdowns, function-call and rescheduling IPIs; in a VM each is a trip through the
# hypervisor, and a shootdown stops every CPU the process runs on), and the server's minor page
# faults and context switches (its threads, from /proc), and the CPU time the hypervisor stole
# from this VM's CPUs (/proc/stat's steal: a host busy with other guests), beside req/s and
# oha's p50/p90/p99.
# Three targets, measured in turn ROUNDS times per connection count: the native handler, serve A
# (GPUHOST as it is) and serve B (the same binary with the environment B_ENV, say a jemalloc
# option), each the stamp repository's sandboxed http-stamp.
#   bash scripts/probes/serve-ipis.sh GPUHOST
# Env: OHA (target/oha/bin/oha), GUESTS (folder of http_stamp.wasm), SECS (3), ROUNDS (2), CS
# ("1 16"), B_ENV ("_RJEM_MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1": jemalloc never gives
# pages back, so it makes no madvise), GPUHOST_DRIVER (softcuda).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { echo "usage: $0 GPUHOST" >&2; exit 2; }
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
bin=$1; oha=${OHA:-target/oha/bin/oha}; secs=${SECS:-3}; rounds=${ROUNDS:-2}
b_env=${B_ENV:-_RJEM_MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1}
gpu=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
work=$(mktemp -d); pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
"$bin" serve --repository "$work/repo" --listen 127.0.0.1:18291 > "$work/a.out" 2> "$work/a.err" & pids+=($!)
env "$b_env" "$bin" serve --repository "$work/repo" --listen 127.0.0.1:18292 > "$work/b.out" 2> "$work/b.err" & pids+=($!)
"$bin" bench --native-http 127.0.0.1:18293 --bundle crates/gpuhost/bundles/stamp-a > "$work/n.out" 2>&1 & pids+=($!)
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:18291/sandboxed > /dev/null && curl -sf http://127.0.0.1:18292/sandboxed > /dev/null \
    && curl -sf http://127.0.0.1:18293/stamp > /dev/null && break
  sleep 0.1
done
source scripts/lib/oha.sh
for u in 18291/sandboxed 18292/sandboxed 18293/stamp; do
  "$oha" --no-tui -n 1000 -c 4 "http://127.0.0.1:$u" > /dev/null
done
# "TLB CAL RES" summed over the CPUs.
ipis() { awk '$1 == "TLB:" || $1 == "CAL:" || $1 == "RES:" {n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i; v[$1] = n}
  END {print v["TLB:"] + 0, v["CAL:"] + 0, v["RES:"] + 0}' /proc/interrupts; }
# Steal time of all CPUs, in clock ticks (/proc/stat's first line, its eighth value).
steal() { awk '$1 == "cpu" {print $9; exit}' /proc/stat; }
# "minor faults, context switches" of the process, all its threads.
faults_switches() {
  echo "$(awk '{print $10}' "/proc/$1/stat") $(cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {n += $2} END {print n + 0}')"
}
echo "B: $b_env"
echo "| c | target | round | req/s | p50 / p90 / p99 µs | TLB shootdowns / req | CAL IPIs / req | RES IPIs / req | minor faults / req | context switches / req | steal, µs / req |"
echo "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|"
for c in ${CS:-1 16}; do
  for r in $(seq "$rounds"); do
    for t in native A B; do
      case $t in native) u=18293/stamp p=${pids[2]};; A) u=18291/sandboxed p=${pids[0]};; B) u=18292/sandboxed p=${pids[1]};; esac
      read -r t0 c0 r0 < <(ipis); read -r f0 s0 < <(faults_switches "$p"); st0=$(steal)
      report=$("$oha" --no-tui -z "${secs}s" -c "$c" -w "http://127.0.0.1:$u")
      read -r t1 c1 r1 < <(ipis); read -r f1 s1 < <(faults_switches "$p"); st1=$(steal)
      rps=$(oha_rps "$report"); n=$((rps * secs))
      per() { awk -v d="$1" -v n="$n" 'BEGIN {printf "%.2f", (n > 0 ? d / n : 0)}'; }
      echo "| $c | $t | $r | $rps | $(oha_us "$report" 50.00%) / $(oha_us "$report" 90.00%) / $(oha_us "$report" 99.00%) | $(per $((t1 - t0))) | $(per $((c1 - c0))) | $(per $((r1 - r0))) | $(per $((f1 - f0))) | $(per $((s1 - s0))) | $(per $(((st1 - st0) * 1000000 / $(getconf CLK_TCK)))) |"
    done
  done
done
