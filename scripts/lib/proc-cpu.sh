# shellcheck shell=bash
# Sourced by the serve probes that count a server's CPU from /proc (the GPU machine has no perf):
# `proc_cpu PID` prints the process's CPU time (user + system, all threads) in clock ticks;
# `proc_threads PID` prints one line per thread name, "name all user system switches": CPU time
# in clock ticks and context switches, voluntary and not (digits folded out of names: every
# tokio-rt-worker together); `proc_us_per_request TICKS RPS SECS` turns TICKS of CPU over a run of
# SECS seconds at RPS requests a second into µs per request (0 when nothing was served). $CLK_TCK
# ticks are a second.
CLK_TCK=$(getconf CLK_TCK)
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
proc_threads() {
  local t s name rest
  for t in /proc/"$1"/task/*; do
    # comm may hold spaces: the fields after the closing parenthesis start at state.
    s=$(cat "$t/stat" 2>/dev/null) || continue
    name=${s#*(}; name=${name%%)*}
    rest=${s##*) }
    # shellcheck disable=SC2086
    set -- $rest
    echo "${name//[0-9]/} ${12} ${13} $(awk '/ctxt_switches/ {n += $2} END {print n + 0}' "$t/status" 2>/dev/null)"
  done | awk '{u[$1]+=$2; s[$1]+=$3; c[$1]+=$4} END{for(k in u) print k, u[k]+s[k], u[k], s[k], c[k]}'
}
proc_us_per_request() {
  awk -v d="$1" -v r="$2" -v s="$3" -v hz="$CLK_TCK" 'BEGIN {printf "%.1f", (r > 0 ? d / hz / (r * s) * 1e6 : 0)}'
}
