#!/usr/bin/env bash
# Watchdog beside .ci/run's `cargo test`. A test binary (target/debug/deps/*) that has run longer
# than CI_HANG_SECS (1200; the longest suite takes about 6 minutes on the CI machine) is taken for
# hung: every thread's backtrace is printed (gdb, installed only then), and the binary is killed.
# So a deadlock fails the run within minutes, with the stuck stacks in its log, instead of running
# silently into CI's 90-minute limit (session 49's hang at 08104c7 was found only by hand).
#   bash .ci/hang-watch.sh PID   (watches until process PID exits)
set -u
parent=$1
limit=${CI_HANG_SECS:-1200}
seen=" "

# pid, seconds running and executable of every process under $parent (and only those: another
# run on the same machine is not this watchdog's business).
descendants() {
  ps -eo pid=,ppid=,etimes=,args= | awk -v root="$parent" '
    { pid[NR] = $1; ppid[NR] = $2; line[NR] = $1 " " $3 " " $4 }
    END {
      mine[root] = 1
      do {
        grew = 0
        for (i = 1; i <= NR; i++)
          if ((ppid[i] in mine) && !(pid[i] in mine)) { mine[pid[i]] = 1; grew = 1 }
      } while (grew)
      for (i = 1; i <= NR; i++) if (pid[i] in mine && pid[i] != root) print line[i]
    }'
}
while kill -0 "$parent" 2>/dev/null; do
  sleep 15
  while read -r pid secs exe; do
    case "$exe" in *target/debug/deps/*) ;; *) continue ;; esac
    [ "$secs" -ge "$limit" ] || continue
    case "$seen" in *" $pid "*) continue ;; esac
    seen="$seen$pid "
    echo "ci: hang-watch: $exe (pid $pid) has run ${secs} s, past CI_HANG_SECS=$limit: taken for" \
      "hung. Its threads' backtraces follow; then it is killed." >&2
    if ! command -v gdb >/dev/null 2>&1; then
      { apt-get update -qq && apt-get install -y -qq gdb; } >/dev/null 2>&1
    fi
    timeout 300 gdb -p "$pid" -batch -ex "thread apply all bt" 2>&1 | grep -v '^\[New LWP' >&2
    kill -9 "$pid" 2>/dev/null
  done < <(descendants)
done
