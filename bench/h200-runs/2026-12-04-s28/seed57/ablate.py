#!/usr/bin/env python3
"""s28: ablations of a rewritten module, one sandbox feature taken out each, to find which one
NVIDIA's JIT (-O2 and up) miscompiles. usage: ablate.py IN.ptx (writes IN_<name>.ptx + .globals)"""
import re, shutil, sys
src = sys.argv[1]
text = open(src).read()
def nopoll(t):
    # Every poll block (loop back-edges and call sites) down to its label: gone; a back-edge
    # still branches on its predicate's copy.
    t = re.sub(r"\t@%__sbx_bp sub\.s32[^\n]*\n(.*?\n)*?(\$__sbx_L\d+:)", r"\2", t)
    t = re.sub(r"\tsub\.s32 %__sbx_cnt, %__sbx_cnt, 1;\n(.*?\n)*?(\$__sbx_L\d+:)", r"\2", t)
    return t
def braexit(t):
    # Each entry's polls branch to one exit at its end instead of exiting where they are.
    out = []
    for part in re.split(r"(?=\n\.visible \.entry |\n\.func )", t):
        if part.startswith("\n.visible .entry") and "@%__sbx_p exit;" in part:
            part = part.replace("@%__sbx_p exit;", "@%__sbx_p bra $__sbx_exit;")
            end = part.rstrip().rfind("}")
            part = part[:end] + "$__sbx_exit:\n\texit;\n" + part[end:]
        out.append(part)
    return "".join(out)
variants = {
    "braexit": braexit,
    "ret": lambda t: t.replace("@%__sbx_p exit;", "@%__sbx_p ret;"),
    "noexit": lambda t: t.replace("\t@%__sbx_p exit;\n", ""),
    "noclamp": lambda t: re.sub(r"\tsetp\.gt\.u32 %__sbx_p, (%t\d+), \d+;\n\t@%__sbx_p mov\.u32 %__sbx_f, 1;\n\tmin\.u32 %__sbx_t, %t\d+, \d+;\n\tbrx\.idx %__sbx_t,", r"\tbrx.idx \1,", t),
    "slowonly": lambda t: re.sub(r"@!%gpuhost_vp bra (\$gpuhost_v\d+_s);", r"bra \1;", t),
    "fastonly": lambda t: re.sub(r"\t@!%gpuhost_vp bra \$gpuhost_v\d+_s;\n", "", t),
    "nopoll": nopoll,
    "nobp": lambda t: t.replace("@%__sbx_bp bra", "@%p3 bra").replace("@%__sbx_bp sub", "@%p3 sub").replace("!%__sbx_bp;", "!%p3;"),
}
for name, f in variants.items():
    out = f(text)
    base = src[:-4] + "_" + name
    open(base + ".ptx", "w").write(out)
    shutil.copy(src[:-4] + ".globals", base + ".globals")
    print(f"{base}.ptx: {sum(1 for a, b in zip(text.split(chr(10)), out.split(chr(10))) if a != b)} lines changed, {len(text) - len(out)} bytes fewer")
