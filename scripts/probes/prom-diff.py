#!/usr/bin/env python3
"""What each load run added to `gpuhost serve`'s /metrics (serve-floor.sh's METRICS snapshots).

Given the snapshots in the order they were taken, prints per run and function that served in it:
requests, then per request the µs of each request phase and host call, the bucket each phase's
(and the whole request's) 99th percentile falls in (the histograms' buckets double: a bound, not a
value), the sandbox pairs created and reused, and the pool's gauges at the end of the run. Usage:
    python3 scripts/probes/prom-diff.py DIR/16-ladder2-1.prom DIR/16-ladder3-1.prom ...
(the first snapshot's counters are counted from zero).
"""
import collections
import re
import sys

LINE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')


def parse(path):
    """{(metric, labels...): value} of the counters and gauges this script reads."""
    out = {}
    for line in open(path):
        m = LINE.match(line.strip())
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        out[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(3))
    return out


def by_function(snap, metric, key):
    """{function: {label key's value: value}} of `metric`."""
    out = collections.defaultdict(dict)
    for (name, labels), v in snap.items():
        if name == metric:
            d = dict(labels)
            out[d.get("function", "?")][d.get(key, "")] = v
    return out


def p99_bound(delta, metric, fn, phase=None):
    """The upper bound (µs) of the bucket holding the 99th percentile of `metric`'s run."""
    buckets = []
    for (name, labels), v in delta.items():
        d = dict(labels)
        if name == metric + "_bucket" and d.get("function") == fn and d.get("phase") == phase:
            le = float("inf") if d["le"] == "+Inf" else float(d["le"])
            buckets.append((le, v))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    return next(le * 1e6 for le, v in buckets if v >= 0.99 * total)


def main():
    prev = {}
    for path in sys.argv[1:]:
        snap = parse(path)
        delta = {k: v - prev.get(k, 0.0) for k, v in snap.items()}
        reqs = by_function(delta, "gpuhost_request_duration_seconds_count", "")
        print(f"== {path.rsplit('/', 1)[-1]}")
        for fn, d in sorted(reqs.items()):
            n = d.get("", 0.0)
            if n <= 0:
                continue
            took = by_function(delta, "gpuhost_request_duration_seconds_sum", "")[fn].get("", 0.0)
            print(f"  {fn}: {n:.0f} requests, {took / n * 1e6:.1f} µs each")
            phases = by_function(delta, "gpuhost_request_phase_seconds_sum", "phase")[fn]
            print("    phases µs/req: " + ", ".join(f"{p} {v / n * 1e6:.1f}" for p, v in sorted(phases.items())))
            tails = [("request", p99_bound(delta, "gpuhost_request_duration_seconds", fn))]
            tails += [(p, p99_bound(delta, "gpuhost_request_phase_seconds", fn, p)) for p in sorted(phases)]
            print("    p99 within µs: " + ", ".join(f"{p} ≤ {b:.0f}" for p, b in tails if b is not None))
            calls = by_function(delta, "gpuhost_host_call_seconds_total", "call")[fn]
            counts = by_function(delta, "gpuhost_host_calls_total", "call")[fn]
            busy = sorted(((v, c) for c, v in calls.items() if v > 0), reverse=True)
            print("    host calls µs/req (µs/call): " + ", ".join(
                f"{c} {v / n * 1e6:.1f} ({v / max(counts.get(c, 1), 1) * 1e6:.1f})" for v, c in busy))
            takes = by_function(delta, "gpuhost_function_sandbox_takes_total", "result")[fn]
            kept = by_function(snap, "gpuhost_function_sandbox_kept", "")[fn].get("", 0)
            pending = by_function(snap, "gpuhost_function_sandbox_pending", "")[fn].get("", 0)
            if takes:
                print(f"    sandbox pairs: created {takes.get('created', 0):.0f}, reused "
                      f"{takes.get('reused', 0):.0f}, waited {takes.get('waited', 0):.0f}; "
                      f"kept {kept:.0f}, pending {pending:.0f} at the end")
        prev = snap


if __name__ == "__main__":
    main()
