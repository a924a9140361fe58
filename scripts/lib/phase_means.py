#!/usr/bin/env python3
"""Mean microseconds per request of each `gpuhost serve` request phase, from two /metrics
scrapes of gpuhost_request_phase_seconds (a histogram: _sum and _count per function and phase)
taken before and after a run, so only that run's requests count; and, from the same scrapes,
each gpuhost:cuda host call's count per request and mean microseconds per call
(gpuhost_host_calls_total and gpuhost_host_call_seconds_total by function and call), the
share of requests that found a warm Store ready (gpuhost_function_warm_store_takes_total), and
the quantiles of a phase or a call between the scrapes, from the buckets of its histogram
(gpuhost_request_phase_seconds, gpuhost_host_call_duration_seconds), interpolated as
Prometheus's histogram_quantile does.

The one parser of those metrics: scripts/bench-serve.sh imports `means` and `call_means`,
scripts/probes/serve-phases.sh runs it as a command:

    python3 scripts/lib/phase_means.py FUNCTION BEFORE.txt AFTER.txt [--calls]
    -> setup=0.0us instantiate=0.0us sandbox=0.0us respond=78.9us teardown=1.2us
       warm_setup=2.1us warm_instantiate=10.9us warm_sandbox=1.0us warm=0.98
    (--calls: then the respond phase's quantiles, and one line per call, the slowest in total
    first, its quantiles where the server has gpuhost_host_call_duration_seconds, else n/a)
    ->     respond p50/p90/p99 42.6/98.1/469.3us
    ->     stream/stream.synchronize: 1.00 per request, mean 21.3us per call, p50/p90/p99 ...
"""
import re
import sys

# setup, instantiate and sandbox: a Store made by its request (no warm one was ready), on the
# request's path; the warm_ ones: Stores made ahead (crate::warm), after an earlier request's
# response. Servers before session 53 counted both under the first three.
PHASES = ("setup", "instantiate", "sandbox", "respond", "teardown",
          "warm_setup", "warm_instantiate", "warm_sandbox")
SAMPLE = re.compile(r'^gpuhost_request_phase_seconds_(sum|count)\{([^}]*)\}\s+(\S+)')
CALL = re.compile(r'^gpuhost_host_call(s|_seconds)_total\{([^}]*)\}\s+(\S+)')
TAKE = re.compile(r'^gpuhost_function_warm_store_takes_(total)\{([^}]*)\}\s+(\S+)')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def scrape(text, sample, function, key):
    """(value of label `key`, the sample's first group) -> value, of `function`'s lines matching
    `sample` in one scrape."""
    got = {}
    for line in text.splitlines():
        m = sample.match(line)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(2)))
        if labels.get("function") == function and key in labels:
            got[(labels[key], m.group(1))] = float(m.group(3))
    return got


def totals(text, function):
    """(phase, "sum"|"count") -> value for `function` in one scrape."""
    return scrape(text, SAMPLE, function, "phase")


def means(function, before, after):
    """phase -> µs per request between the scrapes `before` and `after` (texts): the phase's
    time over the requests whose handler ran (the respond phase's count), so a phase only some
    requests pass through (a Store made by a request that found no warm one) counts at its
    share; NaN when no request ran."""
    a, b = totals(after, function), totals(before, function)
    requests = a.get(("respond", "count"), 0) - b.get(("respond", "count"), 0)
    out = {}
    for p in PHASES:
        s = a.get((p, "sum"), 0) - b.get((p, "sum"), 0)
        out[p] = s / requests * 1e6 if requests else float("nan")
    return out


def histogram_mean(metric, function, before, after):
    """Mean µs of the observations of `function`'s histogram `metric` (one series per function)
    between the scrapes; NaN when there were none."""
    sample = re.compile(r'^' + metric + r'_(sum|count)\{([^}]*)\}\s+(\S+)')
    a, b = (scrape(t, sample, function, "function") for t in (after, before))
    n = a.get((function, "count"), 0) - b.get((function, "count"), 0)
    s = a.get((function, "sum"), 0) - b.get((function, "sum"), 0)
    return s / n * 1e6 if n else float("nan")


def duration_mean(function, before, after):
    """Mean µs of `function`'s requests between the scrapes on the server's clock
    (gpuhost_request_duration_seconds: arrival in the handler → response handed to hyper); NaN
    when none ran."""
    return histogram_mean("gpuhost_request_duration_seconds", function, before, after)


def respond_cpu_mean(function, before, after):
    """Mean µs of CPU time of `function`'s guest runs until their responses between the scrapes
    (gpuhost_request_respond_cpu_seconds); NaN when none ran or the server predates it."""
    return histogram_mean("gpuhost_request_respond_cpu_seconds", function, before, after)


def warm_share(function, before, after):
    """The share of `function`'s requests between the scrapes that took a warm Store (NaN when
    none ran, or the server predates the metric)."""
    a, b = scrape(after, TAKE, function, "result"), scrape(before, TAKE, function, "result")
    n = {r: a.get((r, "total"), 0) - b.get((r, "total"), 0) for r in ("hit", "miss")}
    total = n["hit"] + n["miss"]
    return n["hit"] / total if total else float("nan")


def call_totals(text, function):
    """(call, "count"|"seconds") -> value for `function` in one scrape."""
    got = scrape(text, CALL, function, "call")
    return {(c, "count" if kind == "s" else "seconds"): v for (c, kind), v in got.items()}


def call_means(function, before, after):
    """[(call, calls per request, mean µs per call)] of the calls made between the scrapes,
    the most time per request first. Requests are those whose handler answered (the respond
    phase's count)."""
    a, b = call_totals(after, function), call_totals(before, function)
    requests = totals(after, function).get(("respond", "count"), 0) - totals(
        before, function).get(("respond", "count"), 0)
    out = []
    for call in sorted({c for c, _ in a}):
        n = a.get((call, "count"), 0) - b.get((call, "count"), 0)
        s = a.get((call, "seconds"), 0) - b.get((call, "seconds"), 0)
        if n:
            out.append((call, n / requests if requests else float("nan"), s / n * 1e6))
    out.sort(key=lambda c: -c[1] * c[2])
    return out


BUCKET = re.compile(r'^(gpuhost_\w+)_bucket\{([^}]*)\}\s+(\S+)')


def buckets(text, metric, function, key, value):
    """[(upper bound in s, cumulative count)] of `metric`'s series of `function` whose label
    `key` is `value`, in one scrape, ascending (+Inf as inf)."""
    got = []
    for line in text.splitlines():
        m = BUCKET.match(line)
        if not m or m.group(1) != metric:
            continue
        labels = dict(LABEL.findall(m.group(2)))
        if labels.get("function") == function and labels.get(key) == value:
            got.append((float(labels["le"]), float(m.group(3))))
    return sorted(got)


def quantiles(metric, function, key, value, before, after, qs=(0.5, 0.9, 0.99)):
    """µs at each quantile of `qs` of the observations between the scrapes, interpolated
    linearly within the bucket the quantile falls in (the first bucket from 0); the highest
    finite bound where it falls in +Inf; NaN when there were none."""
    b = dict(buckets(before, metric, function, key, value))
    rows = [(le, n - b.get(le, 0)) for le, n in buckets(after, metric, function, key, value)]
    total = rows[-1][1] if rows else 0
    out = []
    for q in qs:
        if not total:
            out.append(float("nan"))
            continue
        rank, low, below = q * total, 0.0, 0.0
        for le, n in rows:
            if n >= rank:
                if le == float("inf"):
                    out.append(low * 1e6)
                else:
                    share = (rank - below) / (n - below) if n > below else 1.0
                    out.append((low + (le - low) * share) * 1e6)
                break
            low, below = le, n
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--calls"]
    if len(args) != 3:
        sys.exit("usage: phase_means.py FUNCTION BEFORE.txt AFTER.txt [--calls]")
    function, before, after = args
    with open(before) as f:
        before = f.read()
    with open(after) as f:
        after = f.read()
    got = means(function, before, after)
    warm = warm_share(function, before, after)
    print(" ".join(f"{p}=" + ("n/a" if v != v else f"{v:.1f}us") for p, v in got.items())
          + " warm=" + ("n/a" if warm != warm else f"{warm:.2f}"))
    if "--calls" in sys.argv:
        def spread(qs):
            return "/".join("n/a" if v != v else f"{v:.1f}" for v in qs) + "us"
        respond = quantiles("gpuhost_request_phase_seconds", function, "phase", "respond",
                            before, after)
        print(f"    respond p50/p90/p99 {spread(respond)}")
        for call, per_request, mean in call_means(function, before, after):
            qs = quantiles("gpuhost_host_call_duration_seconds", function, "call", call,
                           before, after)
            print(f"    {call}: {per_request:.2f} per request, mean {mean:.1f}us per call,"
                  f" p50/p90/p99 {spread(qs)}")
