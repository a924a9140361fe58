#!/usr/bin/env python3
"""Whether a sandboxed kernel's SASS uses the values its fences trust straight from uniform
registers (docs/ISOLATION.md, "A fourth": ptxas let a divergent sibling path overwrite a
uniform register holding a fence's base). The rewrite adds an opaque per-lane zero to each
(`lanemask_lt & (lanemask_lt + 1)`), so the only reader of a uniform register loaded from the
hidden base, size, globals or ctl parameter should be that add; anything else (a compare, a
select, a subtract from an address) means ptxas saw through the zero, or the rewrite left one
raw. An `LDG` through ctl is allowed: an entry's epoch read may use the parameter as loaded.
The scan follows the listing's branches (a register is the zero where it is one on every path)
but not indirect jumps' targets: a canary for the driver in use, not a proof.

usage: sass-uniform.py MODULE.ptx MODULE.sass    (cuobjdump -sass of ptxas's cubin of MODULE.ptx)
Prints one line per function and exits 1 if any function reads a trusted value raw.
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


def step(addr, ins, offs, live, zero, bad):
    """One instruction's effect on `live` (uniform register -> hidden name it may hold) and
    `zero` (vector registers that hold the opaque zero on every path here); a raw read of a
    trusted value goes to `bad`. Gives whether it loaded a hidden parameter."""
    body = re.sub(r"^@!?U?P\w+\s+", "", ins)
    guarded = body != ins
    op, _, args = body.partition(" ")
    dests = args.split(",")[0] if args else ""
    srcs = ",".join(args.split(",")[1:])
    # Readers first: an instruction may read a register and overwrite it. A memory access's
    # `desc[URn]` is the global memory descriptor, not a value: ptxas moves it through vector
    # registers and back (`R2UR`), under predicates the scan does not correlate.
    read = {int(r) for r in regs(re.sub(r"desc\[UR\d+\]", "", srcs), "UR")} & set(live)
    if read:
        hidden = set().union(*(live[r] for r in read))
        ok = (op.startswith("IADD3") or op.startswith("VIADD") or op.startswith("IMAD.IADD")) \
            and regs(srcs, "R") & zero
        ok = ok or (op.startswith("LDG") and hidden == {"ctl"})
        if not ok:
            bad.append((addr, ins))
    written = regs(dests, "R")
    if "SR_LTMASK" in body:
        new = set() if guarded else written
    elif regs(srcs, "R") & zero and (op.startswith("LOP3") or op.startswith("VIADD")
                                     or op.startswith("IADD3") or op.startswith("IMAD")):
        new = set() if guarded else written
    else:
        new = set()
    # A guarded write may not happen: what it writes is no longer known to be the zero.
    zero -= written
    zero |= new
    for w in ur_writes(ins):
        live.pop(w, None)
    ldc = re.match(r"ULDC(\.64)?\s+UR(\d+),\s*c\[0x0\]\[(0x[0-9a-f]+)\]", body)
    loaded = False
    if ldc:
        off, ur = int(ldc.group(3), 16), int(ldc.group(2))
        # A 32-bit load may be a 64-bit parameter's high half.
        for o in [off, off - 4] if not ldc.group(1) else [off]:
            if o in offs:
                loaded = True
                for w in [ur, ur + 1] if ldc.group(1) else [ur]:
                    live[w] = live.get(w, set()) | {offs[o]}
    return loaded


BRANCH = re.compile(r"\b(BRA|BRX|JMP|JMX|CALL\.\S+|RET\.\S+|EXIT|BREAK|KILL)\b(?:\s+(?:U?P\d+,\s*)?(?:R\d+\s+)?(0x[0-9a-f]+))?")


def ur_writes(ins):
    """The uniform registers an unguarded instruction surely writes (a pair for a 64-bit
    result, `.WIDE` multiplies too: UIMAD.WIDE.U32 UR10 writes UR10 and UR11); none for a
    guarded one, which may not happen."""
    if re.match(r"^@!?U?P\w+\s", ins):
        return set()
    op, _, args = ins.partition(" ")
    out = set()
    for r in regs(args.split(",")[0] if args else "", "UR"):
        out |= {int(r), int(r) + 1} if ".64" in op or ".WIDE" in op else {int(r)}
    return out


def must_write(callee, starts, ends, succ, insts):
    """The uniform registers written on every path from the block `callee` to a return."""
    top = None  # every register: a block no path has reached yet
    into = {b: top for b in starts}
    into[callee] = set()
    work, returns = [callee], []
    while work:
        b = work.pop()
        facts = set(into[b])
        for k in range(b, ends[b]):
            facts |= ur_writes(insts[k][1])
        if re.search(r"\bRET\.", insts[ends[b] - 1][1]):
            returns.append(frozenset(facts))
        for s in succ[b]:
            new = facts if into[s] is top else into[s] & facts
            if new != into[s]:
                into[s] = new
                work.append(s)
    return set.intersection(*map(set, returns)) if returns else set()


def check(insts, offs):
    """The raw reads of trusted uniform registers in one function, as (address, instruction).
    Flow-sensitive: over the listing's basic blocks, a register is the opaque zero where it is
    one on every path (ptxas reuses a register on one path and keeps the zero in it on another),
    and a uniform register holds a hidden value where it may on some path. cuobjdump prints an
    entry's device functions inside its own listing, each starting at a call's target; ptxas
    passes values to them in uniform registers of its own choosing (a callee's `launch` arrived
    in UR7:UR8), so a body starts knowing nothing, as the entry does."""
    at = {int(a, 16): k for k, (a, _) in enumerate(insts)}
    calls, leaders = set(), {0}
    for k, (_, ins) in enumerate(insts):
        m = BRANCH.search(ins)
        if not m:
            continue
        leaders.add(k + 1)
        if m.group(2) and int(m.group(2), 16) in at:
            leaders.add(at[int(m.group(2), 16)])
            if m.group(1).startswith("CALL"):
                calls.add(at[int(m.group(2), 16)])
    starts = sorted(x for x in leaders if x < len(insts))
    ends = {b: (starts[i + 1] if i + 1 < len(starts) else len(insts)) for i, b in enumerate(starts)}
    succ = {}
    for b in starts:
        last = ends[b] - 1
        ins = insts[last][1]
        m = BRANCH.search(ins)
        guarded = bool(re.match(r"^@!?U?P\w+\s", ins))
        nxt = [ends[b]] if ends[b] < len(insts) else []
        if not m or m.group(1).startswith("CALL"):
            succ[b] = nxt
            continue
        target = [at[int(m.group(2), 16)]] if m.group(2) and int(m.group(2), 16) in at else []
        if m.group(1).startswith("BRA"):
            succ[b] = target + (nxt if guarded else [])
        elif m.group(1) in ("BRX", "JMX", "JMP"):
            succ[b] = target + nxt  # indirect: its targets are not listed; the canary, not a proof
        else:  # EXIT, RET, BREAK, KILL
            succ[b] = nxt if guarded else []
    clobbers = {c: must_write(c, starts, ends, succ, insts) for c in calls}
    # Block entry facts: None until a path reaches it. Entries (the function's start and call
    # targets) start empty.
    entry = {b: None for b in starts}
    for b in [0] + sorted(calls):
        entry[b] = ({}, set())  # live, zero
    def replay(b, bad):
        """Block `b` run from its entry facts: its exit facts and its hidden loads. After a
        call, the uniform registers its callee writes on every path hold the callee's values
        (a 64-bit remainder's subroutine returns its result in ones that held a parameter)."""
        live = {r: set(v) for r, v in entry[b][0].items()}
        zero = set(entry[b][1])
        loads = 0
        for k in range(b, ends[b]):
            loads += step(*insts[k], offs, live, zero, bad)
            m = BRANCH.search(insts[k][1])
            if m and m.group(1).startswith("CALL") and m.group(2) and int(m.group(2), 16) in at:
                for w in clobbers.get(at[int(m.group(2), 16)], set()):
                    live.pop(w, None)
        return live, zero, loads

    work = list(starts)
    while work:
        b = work.pop(0)
        if entry[b] is None:
            continue
        live, zero, _ = replay(b, [])
        for s in succ[b]:
            if s in calls or s == 0:
                continue
            old = entry[s]
            if old is None:
                new = ({r: set(v) for r, v in live.items()}, set(zero))
            else:
                merged = {r: old[0].get(r, set()) | live.get(r, set()) for r in set(old[0]) | set(live)}
                new = (merged, old[1] & zero)
            if new != old:
                entry[s] = new
                work.append(s)
    bad = []
    loads = sum(replay(b, bad)[2] for b in starts if entry[b] is not None)
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
