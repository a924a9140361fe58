#!/usr/bin/env python3
"""Loop sizes in cuobjdump -sass output (issue #9: what the PTX sandbox adds per iteration).

Usage: python3 scripts/probes/sass-loops.py K.sandboxed.sass   (files from sass-dump.sh)
Per function: its instruction count (without NOP padding and the closing self-branch) and, for
every back-edge (a BRA to a lower address), the loop's span [target, branch] and its hot count:
the span less the sandbox's cold poll blocks (ranges a forward branch skips that read the
control block with LDG.E.STRONG.SYS). Heuristic: nested loops overlap in the listing."""
import re, sys
fn = None; insts = {}
pat = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')
for line in open(sys.argv[1]):
    m = re.search(r'Function : (\S+)', line)
    if m: fn = m.group(1); insts[fn] = []; continue
    m = pat.search(line)
    if m and fn: insts[fn].append((int(m.group(1), 16), m.group(2)))
br = re.compile(r'BRA (?:!?U?P\d, )?(0x[0-9a-f]+)')
for f, l in insts.items():
    l = [(a, t) for a, t in l if not t.startswith('NOP') and not (br.search(t) and int(br.search(t).group(1), 16) == a)]
    loops = []
    for a, t in l:
        m = br.search(t)
        if m and int(m.group(1), 16) < a:
            tgt = int(m.group(1), 16)
            body = [(b, u) for b, u in l if tgt <= b <= a]
            cold = set()
            for b, u in body:
                m2 = br.search(u)
                if m2 and u.startswith('@') and int(m2.group(1), 16) > b:
                    end = int(m2.group(1), 16)
                    skipped = [(c, v) for c, v in body if b < c < end]
                    if any('STRONG.SYS' in v and v.split()[0].lstrip('@!P0123456789 ').startswith('LDG') or 'LDG.E.STRONG.SYS' in v for _, v in skipped):
                        cold |= {c for c, _ in skipped}
            loops.append(f"{tgt:#x}-{a:#x}: hot {len(body) - len(cold)} (span {len(body)})")
    print(f"  {f}: {len(l)} insts; loops: " + "; ".join(loops))
