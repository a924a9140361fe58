"""s30: the hand-made variants of sbxr5682.ptx (the reducer's program rewritten) that call3.sh to
call7.sh run, each with sbxr5682.globals beside it. Usage (in this folder): python3 variants.py
a1: the generic store of the jump table's second target sent straight to its global fence
a2: every poll's `exit` deleted;  u: versioning's `bra.uni` written `bra` (also of sbx5682.ptx)
s0..s5: one versioned loop's check made a branch to its slow copy; sall: all six
r: each versioned loop's check in registers of its own;  j / b: the first jump as a chain of
equality compares / as a `brx.idx`"""
import re, shutil
src = open("sbxr5682.ptx").read()
out = {}
out["a1"] = src.replace("\tisspacep.shared %__sbx_p, %__sbx_a;\n\t@%__sbx_p bra $__sbx_L5;\n"
                        "\tisspacep.local %__sbx_p, %__sbx_a;\n\t@%__sbx_p bra $__sbx_L6;\n", "", 1)
out["a2"] = re.sub(r"\t@%__sbx_p exit;\n", "", src)
uni = lambda s: s.replace("\tbra.uni $gpuhost_v", "\tbra $gpuhost_v")
out["u"] = uni(src)
check = re.compile(r"\t@!%gpuhost_vp bra (\$gpuhost_v\d+_s);\n")
for i, m in enumerate(check.finditer(src)):
    out[f"s{i}"] = src[:m.start()] + f"\tbra {m.group(1)};\n" + src[m.end():]
out["sall"] = check.sub(r"\tbra \1;\n", src)
lines, k, inside = [], -1, False
for l in src.split("\n"):
    if re.match(r"\tcvt\.[us]64\.[us]32 %gpuhost_vd0,", l):
        k, inside = k + 1, True
    if inside:
        l = re.sub(r"%gpuhost_vd(\d)", lambda m: f"%gpuhost_w{k}_{m.group(1)}", l)
        l = l.replace("%gpuhost_vp", f"%gpuhost_wp{k}")
        inside = "@!%gpuhost_wp" not in l
    lines.append(l)
decl = "\t.reg .pred %gpuhost_vp;\n\t.reg .b64 %gpuhost_vd<4>;\n"
regs = "".join(f"\t.reg .pred %gpuhost_wp{i};\n\t.reg .b64 %gpuhost_w{i}_<4>;\n" for i in range(k + 1))
out["r"] = "\n".join(lines).replace(decl, decl + regs)
search = ("\tsetp.ge.u32 %__sbx_p, %t0, 1;\n\t@%__sbx_p bra $__sbx_L1;\n\tbra $G3;\n$__sbx_L1:\n"
          "\tsetp.ge.u32 %__sbx_p, %t0, 2;\n\t@%__sbx_p bra $__sbx_L2;\n\tbra $G4;\n$__sbx_L2:\n\tbra $G5;\n")
out["j"] = src.replace(search, "\tsetp.eq.u32 %__sbx_p, %t0, 0;\n\t@%__sbx_p bra $G3;\n"
                       "\tsetp.eq.u32 %__sbx_p, %t0, 1;\n\t@%__sbx_p bra $G4;\n\tbra $G5;\n", 1)
out["b"] = src.replace(search, "\tbrx.idx %t0, $G2;\n", 1)
for name, text in out.items():
    assert text != src, name
    open(f"sbxr5682{name}.ptx", "w").write(text)
    shutil.copy("sbxr5682.globals", f"sbxr5682{name}.globals")
open("sbx5682u.ptx", "w").write(uni(open("sbx5682.ptx").read()))
shutil.copy("sbx5682.globals", "sbx5682u.globals")
