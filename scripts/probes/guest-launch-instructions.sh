#!/usr/bin/env bash
# Instructions per guest launch (issue #12), repeatable where wall time is not: the launchloop
# guest (examples/guests/launchbench/src/bin/launchloop.rs) under callgrind on softcuda, run
# twice per case with N1 and N2 launches; every figure is the difference between the two runs
# over N2 - N1, so the guest's own start-up and warm-up cancel out. Counted on the guest's thread
# only (softcuda's threads run the kernels: an NVIDIA GPU's work), per launch:
#   thread    everything on the guest's thread while it runs the guest: guest code, crossing,
#             host call, its share of the synchronizes (every launch when alone, every 32nd in
#             bursts)
#   guest     compiled wasm (the guest's code, its allocator, wasmtime's trampolines): the
#             code callgrind sees in no object
#   crossing  wasmtime's import entry less the host function: lifting the call's arguments,
#             lowering its result, its resource-borrow and task bookkeeping (the synchronizes'
#             share included)
#   host call inside `stream.launch` / `stream.enqueue` / `bound-launch.enqueue` (gpuhost-wasm's
#             HostStream and HostBoundLaunch impls)
#   driver    softcuda's cuLaunchKernel inside the host call (0 when collected for a graph)
#   flush     issuing collected launches as a graph (burst.rs; softcuda's graph launch
#             included): inside the host call of a batch's 32nd launch, else in synchronize
#   sync      inside `stream.synchronize` (its flush included)
#   other     the rest of the thread: a synchronize's wait (fiber switches, the executor's
#             park and wake-up, the Completion's poll), counted as if every synchronize parks
#             (see below: on a GPU a launch that ends within the spin budget does not)
# What would not cancel is kept out, so that two runs of one binary agree within ~1%:
#   - the compile: cranelift compiles the component on this thread, hash-seeded, 1e5-1e6
#     instructions apart between runs. Callgrind collects nothing from the start
#     (--collect-atstart=no) and only inside `gpuhost run`'s tokio block_on, which runs the guest
#     (--toggle-collect=$run_guest): process start-up, Runtime::new, the compile and exit are out.
#   - jemalloc's thread-cache GC, by default its experimental one, paced by wall time (which
#     valgrind stretches) and flushing what the compile left cached: _RJEM_MALLOC_CONF (unless
#     set) selects the classic GC, paced by bytes allocated.
#   - the thread races: whether softcuda's worker ends the kernel before the synchronize looks,
#     and how many looks fit in the 10 us spin budget. Valgrind is pinned to one CPU at SCHED_FIFO
#     (chrt, if permitted: root or CAP_SYS_NICE; else a warning) with --fair-sched=yes, so the
#     worker runs only when the guest's thread blocks (every synchronize parks), and
#     $slow (a slower JIT and cache and branch simulation, whose figures are not used)
#     make each look outlast the budget, so every synchronize looks once (instructions counted
#     are the program's either way).
#   bash scripts/probes/guest-launch-instructions.sh GPUHOST [CASE...]
# CASE: PATH-PATTERN, PATH list, prepared, bound or held, PATTERN alone or burst (default:
# list-alone list-burst bound-alone bound-burst). Env: GUESTS
# (target/guests/wasm32-wasip2/release), N1 (64), N2 (576), SANDBOX (unset: --trusted, as the
# bench's guest-vs-native rows; 1: sandboxed), KEEP (a folder to keep the callgrind output in),
# FROM (a KEEP folder of an earlier run, N1 and N2 as then: its files are read again, nothing runs).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 GPUHOST [CASE...]" >&2; exit 2; }
gpuhost=$1; shift
cases=${*:-list-alone list-burst bound-alone bound-burst}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
guest=${GUESTS:-target/guests/wasm32-wasip2/release}/launchloop.wasm
[ -f "$guest" ] || { echo "no $guest: build examples/guests for wasm32-wasip2" >&2; exit 1; }
n1=${N1:-64}; n2=${N2:-576}
trusted=--trusted; [ -n "${SANDBOX:-}" ] && trusted=
run_guest='tokio::runtime::runtime::Runtime::block_on'
slow='--vex-iropt-level=0 --cache-sim=yes --branch-sim=yes'
export _RJEM_MALLOC_CONF=${_RJEM_MALLOC_CONF-experimental_tcache_gc:false}
# One CPU (the first this shell may use), FIFO on it when permitted.
cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
pin=(taskset -c "$cpu")
if chrt -f 1 true 2>/dev/null; then pin=(chrt -f 1 "${pin[@]}")
else echo "warning: no SCHED_FIFO (chrt -f): sync and other will vary between runs" >&2; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf "%-15s%10s%10s%10s%10s%10s%10s%10s%10s\n" case thread guest crossing "host call" driver flush sync other
for c in $cases; do
  path=${c%-*}; pattern=${c#*-}
  for n in "$n1" "$n2"; do
    [ -n "${FROM:-}" ] && { cp "$FROM/$c.$n".* "$work/"; continue; }
    "${pin[@]}" valgrind --tool=callgrind --separate-threads=yes --fair-sched=yes $slow \
      --collect-atstart=no --toggle-collect="$run_guest" --callgrind-out-file="$work/$c.$n.%p" \
      "$gpuhost" run $trusted "$guest" -- "$n" "$path" "$pattern" > "$work/$c.$n.out" 2>&1 \
      || { echo "$c N=$n failed:"; tail -5 "$work/$c.$n.out"; exit 1; }
  done
  python3 - "$work" "$c" "$n1" "$n2" <<'PY'
import glob, re, sys
sys.path.insert(0, "scripts/probes")
import callgrind_file
COLUMNS = ["thread", "guest", "crossing", "host", "driver", "flush", "sync", "other"]
from collections import defaultdict
work, case, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def parse(path):
    """One callgrind file: per function its self cost and inclusive cost (inlined code counted
    in the function it was inlined into), the cost of each caller -> callee edge, the thread's
    total, and the self cost of code in no object (compiled wasm)."""
    own, incl, edge = defaultdict(int), defaultdict(int), defaultdict(int)
    total = anon = 0
    for kind, fn, fn_obj, cfn, _, cost in callgrind_file.lines(path):
        if kind == "total":
            total = max(total, cost)
        elif kind == "call":
            edge[(fn, cfn)] += cost
            if cfn != fn:
                incl[fn] += cost
        else:
            own[fn] += cost
            incl[fn] += cost
            if fn_obj == "???":
                anon += cost
    return own, incl, edge, total, anon

HOST = r"Host(Stream|BoundLaunch) for .*CudaCtxView.*>::(launch|enqueue)$|CudaCtxView>::launch_args$"
ENTRY = "wasmtime::runtime::component::func::host::HostFn::entrypoint"
# What wasmtime's import entry calls that is not the crossing: the host function itself, and
# an async import's wait (synchronize: the fiber and the executor).
# (the host function is `run`, or the HostStream method when `run` is inlined).
NOT_CROSSING = r"HostFn<T,P,R>>::run$|BlockingContext::with$|catch_unwind_and_record_trap|" + HOST

def figures(n):
    for f in sorted(glob.glob(f"{work}/{case}.{n}.*")):
        if f.endswith(".out"):
            continue
        own, incl, edge, total, anon = parse(f)
        if not any(re.search(HOST, k) for k in incl):
            continue
        pick = lambda pat: max([v for k, v in incl.items() if re.search(pat, k)] or [0])
        crossing = own[ENTRY] + sum(v for (a, b), v in edge.items()
                                    if a == ENTRY and not re.search(NOT_CROSSING, b))
        crossing += sum(v for k, v in own.items()
                        if re.search(r"HostFn::cabi_entrypoint|catch_unwind_and_record_trap", k))
        return dict(thread=total, guest=anon, host=pick(HOST),
                    driver=pick(r"^cuLaunchKernel$"),
                    flush=pick(r"<impl gpuhost_wasm::ctx::CudaCtxView>::flush$"),
                    # `synchronize` is inlined into wasmtime's glue: its two parts.
                    sync=pick(r"<impl gpuhost_wasm::ctx::CudaCtxView>::flush_point$")
                    + pick(r"<impl gpuhost_wasm::ctx::CudaCtxView>::drain::\{\{closure\}\}$"),
                    crossing=crossing)
    sys.exit(f"{case} N={n}: no thread made the host call (is the --toggle-collect symbol, "
             "tokio's Runtime::block_on, still in GPUHOST?)")

a, b = figures(n1), figures(n2)
d = {k: (b[k] - a[k]) / (n2 - n1) for k in a}
d["other"] = d["thread"] - d["guest"] - d["host"] - d["sync"] - d["crossing"]
print(f"{case:<15}" + "".join(f"{d[k]:>10.0f}" for k in COLUMNS))
PY
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/$c".* "$KEEP/"; fi
done
