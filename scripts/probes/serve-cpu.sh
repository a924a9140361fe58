#!/usr/bin/env bash
# Is `gpuhost serve` CPU-bound at 16 and 64 connections (issue #11)? The GPU machine has no perf,
# so this reads /proc: for the native handler and the http-stamp function (sandboxed, trusted)
# at each connection count, `oha -z $SECS` while the machine's busy time, the server's CPU time
# by thread name and oha's own CPU time are taken before and after. Prints req/s, the machine's
# cores busy (of nproc), the server's and oha's cores, the server's CPU µs per request, and its
# threads' cores by name (tokio workers, the completion thread, the resetter, the watchdog...).
# Runs on the GPU machine from the packed .gpu/ (gpuhost, oha, guests); carry [".gpu"].
#   bash scripts/probes/serve-cpu.sh          Env: SECS (3), CS ("1 16 64"), FNS ("native sandboxed trusted")
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
gpu=$PWD/.gpu; oha=$gpu/bin/oha; secs=${SECS:-3}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
"$gpu/bin/gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:18381 > "$work/serve.out" 2> "$work/serve.err" & serve_pid=$!
"$gpu/bin/gpuhost" bench --native-http 127.0.0.1:18382 --bundle crates/gpuhost/bundles/stamp-a > "$work/native.out" 2>&1 & native_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18381/sandboxed > /dev/null && curl -sf http://127.0.0.1:18382/stamp > /dev/null && break; sleep 0.1; done

# Machine busy and total jiffies: "busy total".
machine() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
source scripts/lib/proc-cpu.sh
hz=$CLK_TCK; cores=$(nproc)
printf '%-10s %3s %9s %7s %7s %6s %9s  %s\n' target c req/s busy server oha us/req "server threads (cores)"
for target in ${FNS:-native sandboxed trusted}; do
  url=http://127.0.0.1:18381/$target; pid=$serve_pid
  [ $target = native ] && { url=http://127.0.0.1:18382/stamp; pid=$native_pid; }
  "$oha" --no-tui -n 3000 -c 16 "$url" > /dev/null
  for c in ${CS:-1 16 64}; do
    m0=$(machine); proc_threads $pid > "$work/t0"
    # oha's CPU: the subshell's children times (bash `times`, second line: user and sys).
    ( "$oha" --no-tui -z "${secs}s" -c "$c" -w "$url" > "$work/oha.txt"; times > "$work/times" )
    m1=$(machine); proc_threads $pid > "$work/t1"
    rps=$(awk '/Requests\/sec/{print $2}' "$work/oha.txt")
    oha_s=$(tail -1 "$work/times" | awk '{split($1,u,"m"); split($2,s,"m"); print u[1]*60+u[2]+s[1]*60+s[2]}')
    read -r b0 t0 <<< "$m0"; read -r b1 t1 <<< "$m1"
    srv=$(awk 'NR==FNR{a[$1]=$2; next} {d=$2-a[$1]; tot+=d} END{print tot}' "$work/t0" "$work/t1")
    # Per thread name: cores (user+system, then system alone in brackets).
    per=$(awk 'NR==FNR{a[$1]=$2; s[$1]=$4; next} {d=$2-a[$1]; if (d>0) printf "%s=%.2f(sys %.2f) ", $1, d/'"$hz"'/'"$secs"', ($4-s[$1])/'"$hz"'/'"$secs"'}' "$work/t0" "$work/t1")
    awk -v tgt=$target -v c=$c -v rps="$rps" -v b=$((b1-b0)) -v t=$((t1-t0)) -v cores=$cores \
        -v srv="$srv" -v oha="$oha_s" -v hz=$hz -v secs=$secs -v per="$per" 'BEGIN{
      printf "%-10s %3d %9.0f %7.2f %7.2f %6.2f %9.1f  %s\n", tgt, c, rps, b/t*cores, srv/hz/secs, oha/secs,
             (rps>0 ? srv/hz/(rps*secs)*1e6 : 0), per }'
  done
done
echo "(busy, server, oha: cores busy on average over the run, of $cores; us/req: the server's CPU per request;"
echo " per thread name: cores, of which in the kernel (sys))"
