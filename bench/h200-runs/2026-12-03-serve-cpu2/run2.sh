#!/usr/bin/env bash
# Interleaved A/B (helper serve-cpu2): one server process per config, all started at once; each
# round loads each in turn (oha -z SECS) for each function and c. Args: ROUNDS.
set -uo pipefail
trap 'kill $(jobs -p) 2>/dev/null' EXIT
cd "$(dirname "$0")/.."
x=$(mktemp -d); tar -C "$x" -xJf .serve-exp/bin.tar.xz
gpuhost=$x/gpuhost; oha=$x/oha; secs=${SECS:-2}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
repo=$(mktemp -d)
for f in sandboxed trusted; do
  mkdir -p $repo/$f/bundle; cp $x/http_stamp.wasm $repo/$f/function.wasm; cp crates/gpuhost/bundles/stamp-a/* $repo/$f/bundle/
  sb=true; [ $f = trusted ] && sb=false
  printf 'route = "/%s"\nsandbox = %s\n[serve]\nmax_concurrency = 128\nmax_queue = 1024\n' $f $sb > $repo/$f/function.toml
done
threads() {
  for t in /proc/"$1"/task/*; do
    s=$(cat "$t/stat" 2>/dev/null) || continue
    name=${s#*(}; name=${name%%)*}; rest=${s##*) }; set -- $rest
    echo "${name//[0-9]/} $((${12} + ${13}))"
  done | awk '{u[$1]+=$2} END{for(k in u) print k, u[k]}'
}
hz=$(getconf CLK_TCK)
measure() { # label pid url c
  threads $2 > $x/t0
  "$oha" --no-tui -z "${secs}s" -c "$4" -w "$3" > $x/oha.txt
  threads $2 > $x/t1
  rps=$(awk '/Requests\/sec/{print $2}' $x/oha.txt); p99=$(awk '/ 99.00%/{print $(NF-1)}' $x/oha.txt)
  ok=$(awk '/\[200\]/{print $2}' $x/oha.txt)
  awk -v l="$1" -v c=$4 -v rps=$rps -v p99=$p99 -v ok=${ok:-0} -v hz=$hz 'NR==FNR{a[$1]=$2; next} {d=$2-a[$1]; tot+=d; if ($1=="tokio-rt-worker") w=d}
    END{printf "%-24s c=%-3d rps=%7.0f p99=%s ms cpu/req=%6.1f worker/req=%6.1f\n", l, c, rps, p99, tot/hz/ok*1e6, w/hz/ok*1e6}' $x/t0 $x/t1
}
declare -A pid url
port=18600
"$gpuhost" bench --native-http 127.0.0.1:$port --bundle crates/gpuhost/bundles/stamp-a > $x/native.out 2>&1 & pid[native]=$!; url[native]=http://127.0.0.1:$port/stamp
cfgs=(native)
for cfg in ${CFGS:-base}; do
  port=$((port + 1)); envs=(); [ "$cfg" != base ] && IFS=, read -ra envs <<< "$cfg"
  env "${envs[@]}" "$gpuhost" serve --repository $repo --listen 127.0.0.1:$port > $x/s$port.out 2> $x/s$port.err & pid[$cfg]=$!; url[$cfg]=http://127.0.0.1:$port
  cfgs+=("$cfg")
done
sleep 3; for c in "${cfgs[@]}"; do echo "$c ${pid[$c]}"; done; ps -o pid,comm -p "$(echo ${pid[@]} | tr " " ,)"
for cfg in "${cfgs[@]}"; do
  for _ in $(seq 100); do curl -sf ${url[$cfg]}/trusted >/dev/null || curl -sf ${url[$cfg]} > /dev/null && break; sleep 0.1; done
  u=${url[$cfg]}/trusted; [ $cfg = native ] && u=${url[$cfg]}
  "$oha" --no-tui -n 3000 -c 16 "$u" > /dev/null
done
for r in $(seq ${1:-1}); do
  for f in ${FNS:-trusted}; do for c in ${CS:-64}; do
    for cfg in "${cfgs[@]}"; do
      u=${url[$cfg]}/$f; [ $cfg = native ] && u=${url[$cfg]}
      [ $cfg = native ] && [ $f != trusted ] && continue
      measure "r$r $cfg $f" ${pid[$cfg]} $u $c
    done
  done; done
done
for cfg in "${cfgs[@]}"; do kill ${pid[$cfg]}; done
