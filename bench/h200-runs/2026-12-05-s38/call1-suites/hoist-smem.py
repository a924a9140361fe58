#!/usr/bin/env python3
"""The sandboxed nvcc mma_gemm module with mma_gemm_f16_smem's loop-invariant shared checks
hoisted out of its loop by hand (session 37): the experiment before writing the pass.

Call 1 of session 37 replayed this kernel at 1.22x native on the H100. Its k-loop
($L__BB2_6) checks four shared addresses on every trip that the loop never changes: the
ldmatrix .x4 row address (%rd4), the .x2 one (%rd15), the st.shared address (%r14) and
the cp.async destination (%rd31). ptxas 13.0.88 does not hoist them (its SASS recomputes
them each trip, S2R SR_LANEID included). Here each check runs once before the loop into a
register of its own (%__sbx_h<n>, %__sbx_hq<n>); in the loop only the fault flag's
predicated move and the predicated or redirected access stay, as the sandbox's own
checks leave them. Both copies of the kernel (the entry and its __gpuhost_skip copy) are
edited.

  python3 hoist-smem.py IN.ptx OUT.ptx    (IN: sandbox_dump's nvcc__mma_gemm.ptx at 11d76de)

sandbox_bench times OUT in its "from file" column with
SANDBOX_BENCH_FILE=mma_gemm_f16_smem=OUT (call9.sh).
"""
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()

def check(setup, a, q, sn, flag):
    """A shared window check as the sandbox prints it: `setup` lines load the address into
    `a`, then it is aligned to 16 bytes (or 8 for sn8), compared against the window into `q`,
    the fault flag set when it fails (`flag`), and redirected to the fallback."""
    mask = "4294967288" if sn == "%__sbx_sn8" else "4294967280"
    lines = setup + [
        f"and.b64 {a}, {a}, {mask};",
        f"cvt.u32.u64 %__sbx_o, {a};",
        "sub.u32 %__sbx_o, %__sbx_o, %__sbx_sl;",
        f"setp.lt.u32 {q}, %__sbx_o, {sn};",
    ]
    if flag:
        lines.append(f"@!{q} mov.u32 %__sbx_f, 1;")
    return lines


def ldm4(a, q, flag):
    return check([f"mov.u64 {a}, %rd4;", f"cvta.to.shared.u64 {a}, {a};"], a, q, "%__sbx_sn16", flag) + [
        f"selp.b64 {a}, {a}, %__sbx_st16, {q};"]


def ldm2(a, q, flag):
    lanes = [f"mov.u64 {a}, %rd15;", "mov.u32 %__sbx_o, %laneid;", "setp.lt.u32 %__sbx_p, %__sbx_o, 16;",
             f"selp.b64 {a}, {a}, %__sbx_st16, %__sbx_p;"]
    return check(lanes, a, q, "%__sbx_sn16", flag) + [f"selp.b64 {a}, {a}, %__sbx_st16, {q};"]


def sts(a, q):
    return check([f"cvt.u64.u32 {a}, %r14;"], a, q, "%__sbx_sn8", False)


def cp_dst(a, q, flag):
    return check([f"mov.u64 {a}, %rd31;"], a, q, "%__sbx_sn16", flag)


def text_of(lines):
    return "".join(f"\t{line}\n" for line in lines)


LDM4 = text_of(ldm4("%__sbx_a", "%__sbx_q", True)) + "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {"
LDM2 = text_of(ldm2("%__sbx_a", "%__sbx_q", True)) + "\tldmatrix.sync.aligned.m8n8.x2.shared.b16 {"
STS = text_of(sts("%__sbx_g5", "%__sbx_gq5"))
PREHEADER = "\tcvta.to.shared.u64 %rd31, %rd5;\n$L__BB2_6:\n"
HOISTED = ("\tcvta.to.shared.u64 %rd31, %rd5;\n"
           + text_of(ldm4("%__sbx_h0", "%__sbx_hq0", False) + ldm2("%__sbx_h1", "%__sbx_hq1", False)
                     + sts("%__sbx_g5", "%__sbx_gq5") + cp_dst("%__sbx_h3", "%__sbx_hq3", False))
           + "$L__BB2_6:\n")


def cp_async(g):
    return text_of(cp_dst("%__sbx_a", f"%__sbx_gq{g}", True))


def edit(body):
    head, loop_and_rest = body.split(PREHEADER, 1)
    loop, rest = loop_and_rest.split("$__sbx_L1:\n", 1)
    n = loop.count(LDM4), loop.count(LDM2), loop.count(STS), loop.count(cp_async(0)), loop.count(cp_async(6))
    assert n == (2, 2, 1, 1, 1), n
    loop = loop.replace(LDM4, "\t@!%__sbx_hq0 mov.u32 %__sbx_f, 1;\n\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {")
    loop = loop.replace(LDM2, "\t@!%__sbx_hq1 mov.u32 %__sbx_f, 1;\n\tldmatrix.sync.aligned.m8n8.x2.shared.b16 {")
    loop = loop.replace("{%r74, %r75, %r76, %r77}, [%__sbx_a];", "{%r74, %r75, %r76, %r77}, [%__sbx_h0];")
    loop = loop.replace("{%r87, %r88, %r89, %r90}, [%__sbx_a];", "{%r87, %r88, %r89, %r90}, [%__sbx_h0];")
    loop = loop.replace("{%r78, %r79}, [%__sbx_a];", "{%r78, %r79}, [%__sbx_h1];")
    loop = loop.replace("{%r91, %r92}, [%__sbx_a];", "{%r91, %r92}, [%__sbx_h1];")
    loop = loop.replace(STS, "")
    for g in (0, 6):
        loop = loop.replace(cp_async(g), "\t@!%__sbx_hq3 mov.u32 %__sbx_f, 1;\n")
        loop = loop.replace(f"@%__sbx_gq{g} cp.async.cg.shared.global [%__sbx_a], [%__sbx_g{g}]",
                            f"@%__sbx_hq3 cp.async.cg.shared.global [%__sbx_h3], [%__sbx_g{g}]")
    decl = "\t.reg .pred %__sbx_gq<10>;\n"
    assert head.count(decl) == 1
    head = head.replace(decl, decl + "\t.reg .u64 %__sbx_h<4>;\n\t.reg .pred %__sbx_hq<4>;\n")
    return head + HOISTED + loop + "$__sbx_L1:\n" + rest


out = []
for part in text.split(".visible .entry "):
    if part.startswith("mma_gemm_f16_smem(") or part.startswith("mma_gemm_f16_smem__gpuhost_skip("):
        end = part.index("\n}\n") + 3
        part = edit(part[:end]) + part[end:]
    out.append(part)
open(dst, "w").write(".visible .entry ".join(out))
