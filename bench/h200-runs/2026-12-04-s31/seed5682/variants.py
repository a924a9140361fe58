"""s31: the workaround to try for the ptxas uniform-register fault (s30 seed5682/): every global
fence compares against the hidden `size` parameter itself (`%__sbx_size`, loaded once from
`.param`) instead of a limit the prologue computes from it (`%__sbx_lim<w>`, `%__sbx_lim`, a run's `%__sbx_b`).
The program is legal and stays far inside the 1 MiB arena, so the changed limit does not change
what a right compile computes. Writes sbxr5682p.ptx (reduced) and sbx5682p.ptx (whole), each with
its .globals, from session 30's files. Usage (in this folder): python3 variants.py"""
import re, shutil
s30 = "../../2026-12-04-s30/seed5682/"
for name in ["sbxr5682", "sbx5682"]:
    src = open(s30 + name + ".ptx").read()
    fences = re.compile(r"(\tsetp\.gt(?:\.and)?\.u64 [^,]+, %__sbx_x, )%__sbx_(?:lim\d*|b)\b")
    text, n = fences.subn(r"\1%__sbx_size", src)
    assert n > 0, name
    open(name + "p.ptx", "w").write(text)
    shutil.copy(s30 + name + ".globals", name + "p.globals")
    print(name, n, "fences")
