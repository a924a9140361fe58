#!/usr/bin/env bash
# Instructions per `gpuhost serve` request (issue #11), repeatable where wall time is not (a
# shared machine) and perf has no counters (a VM): the server under callgrind on softcuda, the
# http-stamp function of stamp-repo.sh, $N requests at one connection counted after a warm-up
# (instrumentation off until then: startup, compile and the first Stores are not counted), then
# the instructions of the server's tokio worker threads (where the request, its Store's setup,
# instantiation, teardown and the wasi:http and gpuhost:cuda calls run) per request, the same
# less their idle machinery ("busy": the figure to compare builds by), and the inclusive cost of
# the functions there, per request. softcuda's own threads (its kernels, its
# memsets: an NVIDIA GPU's work, not the host's) and gpuhost's completion thread (it spins
# while events are pending, so its count follows wall time) are left out, and shown apart.
# `native` in place of the function runs the native handler instead (`gpuhost bench --native-http`,
# the same GPU work in process: the baseline the serve path is compared with).
# Requests are paced ($QPS a second): under valgrind a sandboxed request's pair is reset far more
# slowly than requests come at full speed, and unpaced, the pool's pairs all wait for their reset,
# every request makes a new arena, and softcuda runs out of address space (the 500s of the
# counts before session 14). Any answer but 200 is reported, and the counts are then not valid.
# Caveats: valgrind cannot reserve the instance pool's address space (8 TiB; it maps less than
# 64 GiB), so under it the server allocates instances on demand (it logs so): the instantiate
# and teardown counts are that allocator's, not the pool's. Kernel work (mmap, madvise, ioctl)
# and the GPU's are not instructions callgrind sees.
#   bash scripts/probes/serve-callgrind.sh GPUHOST [sandboxed|trusted|native]
# Env: OHA (target/oha/bin/oha), GUESTS (target/guests/wasm32-wasip2/release), N (300),
# WARM (200), QPS (6), SOFTCUDA_LIB (target/release/libsoftcuda.so), TOP (60 lines), KEEP (a folder to
# keep the callgrind output in).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 GPUHOST [sandboxed|trusted]" >&2; exit 2; }
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda} SOFTCUDA_LIB=${SOFTCUDA_LIB:-target/release/libsoftcuda.so}
fn=${2:-sandboxed}; oha=${OHA:-target/oha/bin/oha}; n=${N:-300}; warm=${WARM:-200}
gpu=$(mktemp -d); work=$(mktemp -d); mkdir -p "$gpu/guests"
cp "${GUESTS:-target/guests/wasm32-wasip2/release}/http_stamp.wasm" "$gpu/guests/" || exit 1
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work" "$gpu"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
serve=(serve --repository "$work/repo" --listen 127.0.0.1:18491); url=http://127.0.0.1:18491/$fn
if [ "$fn" = native ]; then
  serve=(bench --native-http 127.0.0.1:18491 --bundle crates/gpuhost/bundles/stamp-a); url=http://127.0.0.1:18491/stamp
fi
valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --callgrind-out-file="$work/cg.%p" \
  "$1" "${serve[@]}" > "$work/out" 2> "$work/err" & pid=$!
for _ in $(seq 600); do curl -sf "$url" > /dev/null && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
curl -sf "$url" > /dev/null || { echo "server did not answer:"; tail -20 "$work/err"; exit 1; }
qps=${QPS:-6}
"$oha" --no-tui -n "$warm" -c 1 -q "$qps" "$url" > /dev/null
callgrind_control -i on "$pid" > /dev/null
"$oha" --no-tui -n "$n" -c 1 -q "$qps" "$url" > "$work/oha.txt"
sleep 2   # the last request's teardown and refill
callgrind_control -d "$pid" > /dev/null
callgrind_control -i off "$pid" > /dev/null
grep -E "Success rate|Requests/sec|\[[0-9]{3}\] [0-9]+ responses" "$work/oha.txt"
grep -E "\[[0-9]{3}\] [0-9]+ responses" "$work/oha.txt" | grep -qv "\[200\]" && echo "WARNING: answers other than 200: these counts are not a served request's"
grep -i "pooling" "$work/err" | head -2
python3 - "$n" "$work"/cg.*-* <<'PY' | head -"${TOP:-60}"
# Per thread: its total and what it is (a tokio worker: counted; else shown apart); then
# the inclusive cost per request of each function over the counted threads.
import re, subprocess, sys
from collections import Counter
n, files = int(sys.argv[1]), sys.argv[2:]
line = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:[^:\s]+:)?(.+?)(?: \[.*\])?$")
counted, incl, apart, driver, idle = 0, Counter(), [], 0, 0
# A worker's idle machinery: tokio's park (epoll, the timer wheel, futexes) and the deadline
# walker's ticks. Paced requests leave the workers idle between them, so these follow wall time
# and the pacing, not the requests: the total moved by up to 7% between runs of one build
# (session 50), the total less these by at most 2.5%.
IDLE = ("tokio::runtime::scheduler::multi_thread::worker::Context::park_internal",
        "gpuhost_serve::deadline::walk_loop::{{closure}}")
own = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(?:[^:\s]+:)?(softcuda::\S+)")
for f in files:
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                         capture_output=True, text=True).stdout
    total, funcs = 0, {}
    for l in out.splitlines():
        m = line.match(l)
        if not m or "=>" in l:
            continue
        c = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in l:
            total = c
        else:
            name = re.sub(r"'\d+$", "", m.group(2))
            funcs[name] = max(funcs.get(name, 0), c)
    if total == 0:
        continue
    text = " ".join(funcs)
    if "multi_thread::worker::Context::run" in text:
        counted += total
        idle += sum(funcs.get(name, 0) for name in IDLE)
        incl.update(funcs)
        # softcuda's own instructions there (the driver calls' emulation; not the host's work,
        # and not what NVIDIA's driver costs): self cost of its functions.
        selfc = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", f],
                               capture_output=True, text=True).stdout
        driver += sum(int(m.group(1).replace(",", "")) for m in map(own.match, selfc.splitlines()) if m)
    else:
        what = max(funcs, key=funcs.get)[:100] if funcs else "?"
        apart.append((total, what))
print(f"tokio worker threads: {counted // n} instructions per request, of which softcuda's own functions {driver // n}: {(counted - driver) // n} without them")
print(f"  busy (less tokio's park and the deadline walker, {idle // n}): {(counted - idle) // n} per request")
for total, what in sorted(apart, reverse=True)[:6]:
    print(f"  not counted: {total // n:>9} per request, a thread in {what}")
print("inclusive instructions per request, counted threads:")
for name, c in incl.most_common():
    print(f"{c // n:>9}  {name[:160]}")
PY
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/cg.* "$work/err" "$KEEP/"; fi
