"""Latency percentiles of each serve-bench round (oha's JSON), serve beside native, in µs.

Usage: python3 tail.py DIR   (DIR: bench-serve.sh's serve-bench folder)
"""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
keys = ["p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99"]
print("| round | " + " | ".join(keys) + " | slowest |")
print("|---|" + "---:|" * (len(keys) + 1))
for f in sorted(out.glob("*-c*-r*.json")):
    d = json.loads(f.read_text())
    pct = d.get("latencyPercentiles", {})
    cells = [f"{pct[k] * 1e6:.0f}" if pct.get(k) is not None else "-" for k in keys]
    slowest = d.get("summary", {}).get("slowest")
    cells.append(f"{slowest * 1e6:.0f}" if slowest is not None else "-")
    print(f"| {f.stem} | " + " | ".join(cells) + " |")
