#!/usr/bin/env python3
"""Mean microseconds per request of each `gpuhost serve` request phase, from two /metrics
scrapes of gpuhost_request_phase_seconds (a histogram: _sum and _count per function and phase)
taken before and after a run, so only that run's requests count.

The one parser of that metric: scripts/bench-serve.sh imports `means`, scripts/probes/
serve-phases.sh runs it as a command:

    python3 scripts/lib/phase_means.py FUNCTION BEFORE.txt AFTER.txt
    -> setup=12.3us instantiate=45.6us sandbox=20.1us respond=78.9us teardown=1.2us
"""
import re
import sys

PHASES = ("setup", "instantiate", "sandbox", "respond", "teardown")
SAMPLE = re.compile(r'^gpuhost_request_phase_seconds_(sum|count)\{([^}]*)\}\s+(\S+)')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def totals(text, function):
    """(phase, "sum"|"count") -> value for `function` in one scrape."""
    got = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(2)))
        if labels.get("function") == function and "phase" in labels:
            got[(labels["phase"], m.group(1))] = float(m.group(3))
    return got


def means(function, before, after):
    """phase -> mean µs per request between the scrapes `before` and `after` (texts); NaN for
    a phase no request of the run reached."""
    a, b = totals(after, function), totals(before, function)
    out = {}
    for p in PHASES:
        n = a.get((p, "count"), 0) - b.get((p, "count"), 0)
        s = a.get((p, "sum"), 0) - b.get((p, "sum"), 0)
        out[p] = s / n * 1e6 if n else float("nan")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: phase_means.py FUNCTION BEFORE.txt AFTER.txt")
    function, before, after = sys.argv[1:]
    with open(before) as f:
        before = f.read()
    with open(after) as f:
        after = f.read()
    got = means(function, before, after)
    print(" ".join(f"{p}=" + ("n/a" if v != v else f"{v:.1f}us") for p, v in got.items()))
