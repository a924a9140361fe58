#!/usr/bin/env bash
# Not yet run (session 54 got no GPU): call1.sh and call2.sh beside this folder run it.
# Session 54: why a lone guest launch's own side (guest code + crossing) costs about twice its
# in-burst cost on NVIDIA (issue #12; session 53: 0.71-0.85 µs alone against 0.37-0.53). Hardware
# counters per thread (perf stat --per-thread, user and kernel apart) of the launchloop guest
# (examples/guests/launchbench/src/bin/launchloop.rs), trusted, for 1.5 s in its steady loop, per
# case: instructions, cycles, IPC and misses per 1000 instructions (L1 instruction cache, iTLB,
# branches, L1 data). If the alone case runs the guest thread's code at a lower IPC with more
# L1i/iTLB misses per instruction than the burst case, the lone launch's extra time is a cold
# instruction path (the driver's and the wait's code evicting the crossing's), not more work.
#   pack: PACK_SUITES=" " bash scripts/gpu-pack.sh; bash scripts/lib/perf-pack.sh
#   device tool: run  command="bash bench/h200-runs/2026-12-07-s54/perfstat/perfstat.sh"  carry=[".gpu"]
set -u
cd "$(dirname "$0")/../../../.."
source scripts/lib/gpu-bin.sh; gpu_call_begin
[ -d .gpu/perf ] || tar -C .gpu -xJf .gpu/perf.tar.xz
PERF="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
ev=cycles:u,instructions:u,cycles:k,instructions:k,L1-icache-load-misses,iTLB-load-misses,branch-misses,L1-dcache-load-misses,context-switches
log=$OUT/logs/perfstat.txt
cat /proc/sys/kernel/perf_event_paranoid > $OUT/logs/paranoid.txt
lscpu | head -20 > $OUT/logs/lscpu.txt
for round in $(seq "${ROUNDS:-2}"); do
for c in list-alone list-burst bound-alone bound-burst; do
  path=${c%-*}; pattern=${c#*-}
  .gpu/bin/gpuhost run --trusted .gpu/guests/launchloop.wasm -- 3000000 "$path" "$pattern" > $OUT/logs/$c.$round.out 2>&1 &
  pid=$!
  sleep 2.5   # the compile and warm-up
  echo "== $c round $round" >> "$log"
  $PERF stat --per-thread -x, -e "$ev" -p "$pid" -- sleep 1.5 >> "$log" 2>&1
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
done
done
gpu_call_end
cat $OUT/machine.txt
tar -xzOf $OUT/logs.tar.gz logs/perfstat.txt | python3 -c '
import sys, collections
case=None; rows=collections.defaultdict(dict)
for line in sys.stdin:
    line=line.strip()
    if line.startswith("=="): case=line[3:]; continue
    p=line.split(",")
    if len(p) < 4 or not p[1].replace(".","").isdigit(): continue
    rows[(case,p[0])][p[3]]=float(p[1])
print("| case | thread | instr u (M) | IPC u | instr k (M) | L1i /1k | iTLB /1k | br-miss /1k | L1d /1k | ctx sw |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (case,thr),r in sorted(rows.items(), key=lambda kv:(kv[0][0], -kv[1].get("instructions:u",0))):
    iu=r.get("instructions:u",0); ik=r.get("instructions:k",0); cu=r.get("cycles:u",0)
    if iu < 5e6: continue
    t=iu+ik
    f=lambda k: "%.2f"%(1000*r[k]/t) if k in r and t else "-"
    print("| %s | %s | %.1f | %.2f | %.1f | %s | %s | %s | %s | %d |"%(case,thr,iu/1e6,iu/cu if cu else 0,ik/1e6,f("L1-icache-load-misses"),f("iTLB-load-misses"),f("branch-misses"),f("L1-dcache-load-misses"),r.get("context-switches",0)))
'
