#!/usr/bin/env python3
"""Where a `gpuhost serve` process's CPU goes, by cost centre, from `perf script -F
comm,tid,ip,sym[,dso] --no-inline` of a `perf record --call-graph dwarf` run (scripts/probes/serve-perf.sh,
serve-profile.sh).

Each sample of a tokio worker is put in the first centre whose pattern one of its frames
matches (so a gpuhost:cuda call made by the guest counts as that, not as the component call
around it); samples of other threads (the completion thread, the watchdog, softcuda's stream
threads) go by thread name. With REQUESTS, each centre's CPU is also given in µs per request.
Then the same samples by their innermost frame (the function the CPU was in, with its library
when the script has dso: where the driver, libc or the kernel take the time), the top 40.

    python3 scripts/lib/perf_centres.py SCRIPT.txt HZ [REQUESTS]
"""
import collections
import re
import sys

CENTRES = [
    ("warm refill: Store setup, instantiation, sandbox prepare", r"gpuhost_serve::warm::"),
    ("teardown: the Store dropped",
     r"gpuhost_serve::invoke::After|InFlight|RequestState as core::ops::drop|deallocate_module|deallocate_memor"),
    ("guest: gpuhost:cuda host calls", r"gpuhost_wasm::"),
    ("guest: wasi:http / wasi:io host calls", r"wasmtime_wasi_http::|wasmtime_wasi::"),
    ("guest: component-model call plumbing (lift, lower, resources, fiber)",
     r"wasmtime::runtime::component|cabi_entrypoint|wasmtime::runtime::vm|wasmtime::runtime::fiber|"
     r"wasmtime_internal_fiber"),
    ("connection: hyper, axum, gpuhost_serve::invoke", r"hyper::|axum::|gpuhost_serve::"),
    ("tokio: scheduling, parking, I/O driver", r"tokio::runtime::|epoll|futex"),
]


def main():
    path, hz = sys.argv[1], float(sys.argv[2])
    requests = float(sys.argv[3]) if len(sys.argv) > 3 else 0
    compiled = [(name, re.compile(rx)) for name, rx in CENTRES]
    by = collections.Counter()
    leaves = collections.Counter()
    total = 0
    for block in open(path, errors="replace").read().split("\n\n"):
        lines = [line for line in block.strip().splitlines() if line.strip()]
        if not lines:
            continue
        total += 1
        comm = lines[0].split()[0]
        inner = lines[1] if len(lines) > 1 else ""
        leaves[leaf(inner) if inner else "no frames"] += 1
        if comm != "tokio-rt-worker":
            by[f"thread {comm}"] += 1
            continue
        frames = "\n".join(lines[1:])
        # JIT code has no symbol: a worker sample whose innermost frame is unknown and that is
        # under a component call is the guest's own wasm (fuel checks included).
        # (With dso in the script, only a leaf in wasmtime's perf map or in no library is JIT
        # code: an unknown leaf in a stripped library, libcuda or libc, goes by its callers.)
        jit = "[unknown]" in inner and (" (" not in inner or "perf-" in inner)
        if jit and "cabi_entrypoint" not in frames:
            by["guest: its own wasm code (JIT, fuel checks included)"] += 1
            continue
        name = next((n for n, rx in compiled if rx.search(frames)), "other: libc, kernel, no frames")
        by[name] += 1
    for name, n in by.most_common():
        per = f"  {n / hz / requests * 1e6:7.1f} µs/request" if requests else ""
        print(f"{100 * n / total:6.1f}%{per}  {name}")
    print(f"{total} samples")
    print("innermost frames:")
    for name, n in leaves.most_common(40):
        per = f"  {n / hz / requests * 1e6:7.2f} µs/request" if requests else ""
        print(f"{100 * n / total:6.1f}%{per}  {name}")


def leaf(frame):
    """`IP SYMBOL (DSO)` as `SYMBOL [library]`, offsets and paths cut."""
    parts = frame.strip().split(None, 1)
    rest = parts[1] if len(parts) > 1 else "[unknown]"
    dso = ""
    if rest.endswith(")") and " (" in rest:
        rest, dso = rest.rsplit(" (", 1)
        dso = " [" + dso[:-1].rsplit("/", 1)[-1] + "]"
    return re.sub(r"\+0x[0-9a-f]+$", "", rest)[:110] + dso


if __name__ == "__main__":
    main()
