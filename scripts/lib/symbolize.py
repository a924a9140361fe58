#!/usr/bin/env python3
"""Names the frames of a stripped test binary in a cuda-gdb backtrace taken on the GPU machine.

The packed binaries are stripped; the same build's unstripped binary is in target/release/deps
here. The load base of the position-independent binary follows from any thread's outermost frame
inside it, which is std's thread_start: the one page-aligned base that puts that return address
inside the function. Usage:
    python3 scripts/lib/symbolize.py LOG target/release/deps/all-<hash> > named.log
"""
import re
import subprocess
import sys


def thread_start(binary):
    out = subprocess.run(["nm", "-C", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "Thread>::new::thread_start" in line:
            return int(line.split()[0], 16)
    sys.exit("no thread_start symbol in " + binary)


def main():
    log_path, binary = sys.argv[1], sys.argv[2]
    log = open(log_path).read()
    frame = r"0x0000([0-9a-f]{12}) in \?\? \(\)"
    addrs = sorted({int(a, 16) for a in re.findall(frame, log)})
    start = thread_start(binary)
    # A thread's last frame in the binary returns into thread_start (within its first 4 KiB).
    bases = {a - start - off for a in addrs for off in range(0x1000) if (a - start - off) % 0x1000 == 0}
    counts = {b: sum(1 for a in addrs if 0 <= a - b - start < 0x1000) for b in bases}
    if not counts:
        sys.exit("no frame looks like thread_start's caller; is this the same build?")
    base = max(counts, key=counts.get)
    names = {}
    for a in addrs:
        r = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", binary, hex(a - base - 1)],
                           capture_output=True, text=True).stdout.strip().split("\n")
        pairs = zip(r[0::2], r[1::2])
        names[a] = " <- ".join(f"{f[:100]} ({loc.split('/')[-1]})" for f, loc in pairs)
    sys.stdout.write(re.sub(frame, lambda m: names[int(m.group(1), 16)], log))


if __name__ == "__main__":
    main()
