#!/usr/bin/env python3
"""Whether a sandboxed kernel's SASS uses the values its fences trust straight from uniform
registers (docs/ISOLATION.md, "A fourth": ptxas let a divergent sibling path overwrite a
uniform register holding a fence's base). The rewrite adds an opaque per-lane zero to each
(`lanemask_lt & (lanemask_lt + 1)`), so the only reader of a uniform register loaded from the
hidden base, size, globals or ctl parameter should be that add; anything else (a compare, a
select, a subtract from an address) means ptxas saw through the zero, or the rewrite left one
raw. An `LDG` through ctl is allowed: an entry's epoch read may use the parameter as loaded.

usage: sass-uniform.py MODULE.ptx MODULE.sass    (cuobjdump -sass of ptxas's cubin of MODULE.ptx)
Prints one line per function and exits 1 if any function reads a trusted value raw. The scan is
linear, in address order, and follows no branches: a canary for the driver in use, not a proof.
"""
import re
import sys

HIDDEN = ["base", "size", "globals", "ctl"]
SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4,
         "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}
PARAMS_AT = 0x210  # sm_90: kernel parameters start at c[0x0][0x210]


def hidden_offsets(ptx):
    """{entry name: {c[0x0] offset: hidden name}} from each .entry's parameter list."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx):
        at, offs = PARAMS_AT, {}
        for p in m.group(2).split(","):
            p = p.split()
            if not p:
                continue
            align = int(p[p.index(".align") + 1]) if ".align" in p else None
            ty = next(t[1:] for t in p if t[1:] in SIZES)
            name = p[-1]
            count = int(re.search(r"\[(\d+)\]", name).group(1)) if "[" in name else 1
            size = SIZES[ty] * count
            align = align or SIZES[ty]
            at = (at + align - 1) // align * align
            h = re.fullmatch(r"__gpuhost_sbx_(\w+)", name)
            if h and h.group(1) in HIDDEN:
                offs[at] = h.group(1)
            at += size
        out[m.group(1)] = offs
    return out


def functions(sass):
    """(name, [(address, instruction)]) for each function in cuobjdump's output."""
    fns, cur = [], None
    for line in sass.splitlines():
        f = re.search(r"Function : (\S+)", line)
        if f:
            cur = (f.group(1), [])
            fns.append(cur)
            continue
        i = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if i and cur:
            cur[1].append((i.group(1), i.group(2).strip()))
    return fns


def regs(text, prefix):
    return set(re.findall(rf"\b{prefix}(\d+)\b", text))


def check(insts, offs):
    """The raw reads of trusted uniform registers in one function, as (address, instruction)."""
    live = {}  # uniform register number -> hidden name, while it holds the parameter
    zero = set()  # vector registers derived from SR_LTMASK
    bad, loads = [], 0
    # cuobjdump prints an entry's device functions inside its own listing, each body starting at
    # a call's target. ptxas passes values to them in uniform registers of its choosing (a
    # callee's `launch` arrived in UR7:UR8), so what a register held in the code above a body
    # says nothing about it there.
    starts = {int(t, 16) for t in re.findall(r"CALL\.REL\S*\s+(0x[0-9a-f]+)", " ".join(i for _, i in insts))}
    for addr, ins in insts:
        if int(addr, 16) in starts:
            live, zero = {}, set()
        body = re.sub(r"^@!?U?P\w+\s+", "", ins)
        op, _, args = body.partition(" ")
        dests = args.split(",")[0] if args else ""
        srcs = ",".join(args.split(",")[1:])
        # Readers first: an instruction may read a register and overwrite it.
        read = {int(r) for r in regs(srcs, "UR")} & set(live)
        if read:
            # A 64-bit value is a pair: its high half's register names it too.
            hidden = {live[r] for r in read}
            ok = (op.startswith("IADD3") or op.startswith("VIADD") or op.startswith("IMAD.IADD")) \
                and regs(srcs, "R") & zero
            ok = ok or (op.startswith("LDG") and hidden == {"ctl"})
            if not ok:
                bad.append((addr, ins))
        if "SR_LTMASK" in body:
            zero |= regs(dests, "R")
        elif regs(srcs, "R") & zero and (op.startswith("LOP3") or op.startswith("VIADD")
                                         or op.startswith("IADD3") or op.startswith("IMAD")):
            zero |= regs(dests, "R")
        else:
            zero -= regs(dests, "R")
        for r in regs(dests, "UR"):
            # A 64-bit result writes a pair.
            for w in [int(r), int(r) + 1] if ".64" in op else [int(r)]:
                live.pop(w, None)
        ldc = re.match(r"ULDC(\.64)?\s+UR(\d+),\s*c\[0x0\]\[(0x[0-9a-f]+)\]", body)
        if ldc:
            off, ur = int(ldc.group(3), 16), int(ldc.group(2))
            # A 32-bit load may be a 64-bit parameter's high half.
            for o in [off, off - 4] if not ldc.group(1) else [off]:
                if o in offs:
                    loads += 1
                    live[ur] = offs[o]
                    if ldc.group(1):
                        live[ur + 1] = offs[o]
    return bad, loads, any("SR_LTMASK" in i for _, i in insts)


def main():
    ptx, sass = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    offsets = hidden_offsets(ptx)
    failed = False
    for name, insts in functions(sass):
        offs = offsets.get(name)
        if offs is None:
            continue
        bad, loads, has_zero = check(insts, offs)
        verdict = "ok" if not bad and (has_zero or not loads) else "RAW"
        failed |= verdict != "ok"
        print(f"{name}: {verdict}; {loads} hidden loads into uniform registers, "
              f"opaque zero {'made' if has_zero else 'MISSING'}, {len(bad)} raw reads")
        for addr, ins in bad[:5]:
            print(f"    /*{addr}*/ {ins}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
