#!/usr/bin/env python3
"""A poor man's profile from cuda-gdb's `thread apply all bt` samples of a gpuhost process (the
GPU machine has no perf or gdb). Per thread kind: how often its threads were seen waiting
(futex, epoll, poll, sleep), inside libcuda, or running; for the threads of KIND (tokio's
workers unless given), which function called libcuda when they were inside it, and the
functions most often on their stacks (each counted once per stack: inclusive). Usage:
    python3 scripts/probes/stacks-summary.py [--kind KIND] [--top N] SAMPLE.txt ...
"""
import argparse
import collections
import re

WAITS = ("syscall", "epoll_wait", "poll", "__GI___poll", "nanosleep", "clock_nanosleep",
         "futex_wait", "pthread_cond_wait", "sched_yield", "__futex_abstimed_wait_common")
# Frames named after these are ours or the runtimes' (the rest: std, core, alloc, libc).
OURS = re.compile(r"gpuhost|wasmtime|tokio|hyper|axum|cudarc|ptxvm|wasi")
FRAME = re.compile(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+?)(?: \(.*?\))?(?: from (\S+))?$")


def frames(block):
    """The frames of one thread's backtrace, innermost first: `??@lib` for unnamed ones."""
    out = []
    for line in block.splitlines()[1:]:
        m = FRAME.match(line.strip())
        if not m:
            continue
        name, lib = m.group(1), m.group(2) or ""
        if name == "??":
            name = "??@" + lib.rsplit("/", 1)[-1]
        out.append(re.sub(r"::h[0-9a-f]{16}$", "", name))
    return out


def state(fs):
    if not fs:
        return "?"
    # Inside the driver, running or waiting on one of its locks.
    if any(f.startswith("??@libcuda") for f in fs):
        return "libcuda" + (":wait" if fs[0] in WAITS else "")
    if fs[0] in WAITS or "lock_contended" in (fs[1] if len(fs) > 1 else ""):
        return "wait:" + (fs[1] if len(fs) > 1 and "lock_contended" in fs[1] else fs[0])
    return "running"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="tokio-rt-worker")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("samples", nargs="+")
    a = ap.parse_args()
    states = collections.defaultdict(collections.Counter)
    callers = collections.Counter()
    inclusive = collections.Counter()
    seen = 0
    for path in a.samples:
        for block in open(path, errors="replace").read().split("\nThread ")[1:]:
            name = re.search(r'"([^"]*)"', block.splitlines()[0])
            kind = re.sub(r"[-_]?\d+$", "", name.group(1) if name else "?")
            fs = frames(block)
            st = state(fs)
            states[kind][st] += 1
            if kind != a.kind:
                continue
            seen += 1
            if st.startswith("libcuda"):
                # The driver entry point and our function that called it.
                named = [f for f in fs if not f.startswith("??@") and (OURS.search(f) or f.startswith("cu"))]
                callers[" < ".join(named[:2]) or "?"] += 1
            for f in set(f for f in fs if OURS.search(f)):
                inclusive[f] += 1
    for kind, c in sorted(states.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"{kind}: " + ", ".join(f"{s} {n}" for s, n in c.most_common(6)))
    if not seen:
        return
    print(f"\n{a.kind}, {seen} stacks: inside libcuda, by caller")
    for f, n in callers.most_common(a.top):
        print(f"  {n:4d} {100 * n / seen:5.1f}%  {f[:150]}")
    print(f"\n{a.kind}: functions on the stack (inclusive)")
    for f, n in inclusive.most_common(a.top):
        print(f"  {n:4d} {100 * n / seen:5.1f}%  {f[:150]}")


if __name__ == "__main__":
    main()
