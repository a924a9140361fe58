#!/usr/bin/env python3
"""Decodes the scheduling control bits of `cuobjdump -sass` output (sm_70 and later): for each
instruction its stall cycles, yield flag, the scoreboard it sets when it writes (wb) or reads
(rb) late, and the scoreboards it waits on. cuobjdump prints only the opcode; the waits are what
tell why a rewritten kernel stalls where the native one does not (issue #9: a loop that waits on
the scoreboard of the sandbox's epoch load).

    python3 scripts/probes/sass-ctl.py FILE.sass [FROM_HEX [TO_HEX]]

The control word is the top 23 bits of each instruction's second 64-bit half: stall (4 bits),
yield (1), write barrier (3), read barrier (3), wait mask (6), reuse (4); barrier 7 means none.
"""
import re
import sys


def decode(path):
    lines = open(path).read().splitlines()
    inst = re.compile(r"\s*/\*([0-9a-f]{4})\*/\s+(.*?)\s*;?\s*/\* (0x[0-9a-f]+) \*/")
    hi_word = re.compile(r"\s*/\* (0x[0-9a-f]+) \*/")
    k = 0
    while k + 1 < len(lines):
        m = inst.match(lines[k])
        h = hi_word.match(lines[k + 1]) if m else None
        if not (m and h):
            k += 1
            continue
        addr, text, _ = m.groups()
        c = int(h.group(1), 16) >> 41
        wb, rb = (c >> 5) & 7, (c >> 8) & 7
        yield int(addr, 16), c & 0xF, (c >> 4) & 1, wb, rb, (c >> 11) & 0x3F, text.strip()
        k += 2


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lo = int(sys.argv[2], 16) if len(sys.argv) > 2 else 0
    hi = int(sys.argv[3], 16) if len(sys.argv) > 3 else 1 << 32
    for addr, stall, yld, wb, rb, wait, text in decode(sys.argv[1]):
        if lo <= addr <= hi:
            print(f"{addr:04x} stall={stall:2d} yield={yld} wb={'-' if wb == 7 else wb} "
                  f"rb={'-' if rb == 7 else rb} wait={wait:06b}  {text}")


if __name__ == "__main__":
    main()
