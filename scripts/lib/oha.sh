# shellcheck shell=bash
# Sourced by the serve probes: the figures of one oha text report (`oha --no-tui`, its summary
# on stdout), so every probe reads them alike. oha names each latency line's unit (secs, ms,
# µs/us, ns); these give µs.
#   oha_rps "$report"          requests a second, rounded
#   oha_us "$report" 99.00%    the latency at that percentile line, µs, rounded ("" if absent)
oha_rps() { awk '/Requests\/sec/ {printf "%.0f", $2}' <<< "$1"; }
oha_us() {
  awk -v k="$2" '$1 == k {u = $4; m = (u == "secs") ? 1e6 : (u == "ms") ? 1e3 : (u == "ns") ? 1e-3 : 1
    printf "%.0f", $3 * m}' <<< "$1"
}
