#!/usr/bin/env bash
# Instructions per native launch issue (issue #12), repeatable where wall time is not: the
# `launch_probe count CASE N` mode (crates/gpuhost/examples/launch_probe.rs) under callgrind on
# softcuda, collecting only inside the case's `issue_*` function (the launches themselves; the
# batches' drains are outside it), run twice per case with N1 and N2 launches. Every figure is
# the difference of the two runs over N2 - N1, so start-up and the first launches' warm-up cancel.
#   total   everything inside issue_*: per launch, the caller's loop, gpuhost, the driver
#   driver  inside calls into libsoftcuda.so (cuLaunchKernel, cuCtxGetId, ...): the driver's
#           share, which an NVIDIA GPU's driver replaces
#   own     total - driver: gpuhost's own code (and the probe's loop, a few instructions; the
#           raw cases' `own` is that loop and cudarc's symbol lookup, the floor to compare with)
#   batch   gpuhost's per-batch work, amortised: closing a batch (Unrecorded::take and ::close:
#           an event recorded every 256 launches, its cuEventRecord included), handing it to the
#           completion thread, and watching a batch just opened (part own, part driver)
# Cases: gh1 raw1 (noop(u32), the bench's launch-issue rows), gh4 raw4 (args4(buffer, buffer,
# u32, f32)), enter (Host::enter), ctx (a bare cuCtxGetCurrent). Default: all six.
#   bash scripts/probes/launch-instructions.sh [CASE...]
# Env: PROBE (target/release/examples/launch_probe), N1 (500), N2 (2500) (multiples of the
# probe's batch of 500), KEEP (a folder to keep the callgrind output in).
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${*:-gh1 raw1 gh4 raw4 enter ctx}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-softcuda}
probe=${PROBE:-${CARGO_TARGET_DIR:-target}/release/examples/launch_probe}
[ -x "$probe" ] || { echo "no $probe: cargo build --release -p gpuhost --example launch_probe" >&2; exit 1; }
n1=${N1:-500}; n2=${N2:-2500}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf "%-8s%10s%10s%10s%10s\n" case total driver own batch
for c in $cases; do
  for n in "$n1" "$n2"; do
    valgrind --tool=callgrind --separate-threads=yes --toggle-collect="launch_probe::issue_$c" \
      --callgrind-out-file="$work/$c.$n.%p" "$probe" count "$c" "$n" > "$work/$c.$n.out" 2>&1 \
      || { echo "$c N=$n failed:"; tail -5 "$work/$c.$n.out"; exit 1; }
  done
  python3 - "$work" "$c" "$n1" "$n2" <<'PY'
import glob, re, sys
sys.path.insert(0, "scripts/probes")
import callgrind_file
work, case, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
DRIVER_OBJ = "libsoftcuda.so"
BATCH = r"gpuhost::stream::Unrecorded::(take|close)$|gpuhost::completion::thread::(hand_over|watch)"

def parse(path):
    """One thread's callgrind file: its collected total, the inclusive cost of calls from code
    outside softcuda into softcuda (the driver's share), and the inclusive cost of calls into
    the per-batch work (BATCH) from outside it."""
    total = driver = batch = 0
    for kind, fn, fn_obj, cfn, cobj, cost in callgrind_file.lines(path):
        if kind == "total":
            total = max(total, cost)
        elif kind == "call":
            if DRIVER_OBJ not in (fn_obj or "") and DRIVER_OBJ in (cobj or ""):
                driver += cost
            if re.search(BATCH, cfn or "") and not re.search(BATCH, fn or ""):
                batch += cost
    return total, driver, batch

def figures(n):
    best = None
    for f in glob.glob(f"{work}/{case}.{n}.*"):
        if f.endswith(".out"):
            continue
        t = parse(f)
        if best is None or t[0] > best[0]:
            best = t
    if not best or best[0] == 0:
        sys.exit(f"{case} N={n}: nothing collected")
    return best

a, b = figures(n1), figures(n2)
d = [(y - x) / (n2 - n1) for x, y in zip(a, b)]
total, driver, batch = d
print(f"{case:<8}{total:>10.1f}{driver:>10.1f}{total - driver:>10.1f}{batch:>10.1f}")
PY
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/$c".* "$KEEP/"; fi
done
