#!/usr/bin/env python3
"""Regenerates call4's variants from ../../call3/variants/at-913d4ba.ptx (913d4ba's rewrite of
corpus/nvcc/mbarrier_pipeline.ptx): the back-edge polls of its spin-wait loops (bodies under 40
lines), its tile loops (over 300) or its inner loops (the rest), or all of them, taken out the
way sandbox_bench's "no loop polls" edit takes them out: from the countdown to the next
`$__sbx_L` label, the back-edge itself kept. Timing only: a loop without its poll cannot be
stopped. Run from this folder."""
import re

src = open("../../call3/variants/at-913d4ba.ptx").read().splitlines(keepends=True)
labels = {}
for i, l in enumerate(src):
    m = re.match(r"\s*(\$[\w]+):\s*$", l)
    if m:
        labels.setdefault(m.group(1), []).append(i)
kinds = {}
for i, l in enumerate(src):
    if "sub.s32 %__sbx_cnt, %__sbx_cnt," in l:
        target = next(
            m.group(1)
            for j in range(i, i + 12)
            if (m := re.search(r"@%__sbx_bp bra (\$[\w]+);", src[j]))
        )
        length = i - max(x for x in labels[target] if x < i)
        kinds[i] = "spin" if length < 40 else ("tile" if length > 300 else "inner")
for name, chosen in [
    ("spin", {"spin"}),
    ("tile", {"tile"}),
    ("inner", {"inner"}),
    ("all", {"spin", "tile", "inner"}),
]:
    out, skip = [], False
    for i, l in enumerate(src):
        if kinds.get(i) in chosen:
            skip = True
        if skip and l.lstrip().startswith("$__sbx_L"):
            skip = False
        if not skip:
            out.append(l)
    open(f"nopoll-{name}.ptx", "w").write("".join(out))
