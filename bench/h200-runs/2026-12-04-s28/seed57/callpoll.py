#!/usr/bin/env python3
"""s28: variants of a rewritten module's call-site polls (the poll the sandbox put between a
`call` and the `ld.param` of its return value): `after` moves each such return-value load up to
just after its call, `none` deletes the polls. usage: callpoll.py after|none IN.ptx OUT.ptx"""
import re, sys
mode, src, dst = sys.argv[1:4]
lines = open(src).read().split("\n")
out, i, n = [], 0, 0
while i < len(lines):
    l = lines[i]
    if l.strip().startswith("call ") and i + 1 < len(lines) and "sub.s32 %__sbx_cnt" in lines[i + 1]:
        j = i + 1
        while not re.match(r"\$__sbx_L\d+:", lines[j].strip()):
            j += 1
        poll, label = lines[i + 1:j], lines[j]
        k = j + 1
        rets = []
        while lines[k].strip().startswith("ld.param"):
            rets.append(lines[k]); k += 1
        out.append(l)
        if mode == "after":
            out += rets + poll + [label]
        else:
            out += rets
        n += 1
        i = k
        continue
    out.append(l); i += 1
open(dst, "w").write("\n".join(out))
print(f"{dst}: {n} call-site polls {mode}")
