"""Hand-made variants of the rewritten matmul_tiled (s29): how the shared fence's form decides
ptxas's code. B: group addresses in 32-bit registers (and.b32), not cvt to 64 bits and back.
C: B, and the group's loads unpredicated, their base moved to the window's start when out of
range (selp), so ptxas can schedule and vectorise them as written.
Usage: python3 variants.py IN.ptx OUTDIR"""
import re, sys
src = open(sys.argv[1]).read()
pat = re.compile(r'\tcvt\.u64\.u32 %__sbx_(\w+), (%\w+);\n\tand\.b64 %__sbx_\1, %__sbx_\1, 4294967292;\n'
                 r'\tcvt\.u32\.u64 %__sbx_o, %__sbx_\1;\n\tsub\.u32 %__sbx_o, %__sbx_o, %__sbx_sl;\n')
def b(s):
    s = pat.sub(lambda m: f'\tand.b32 %__sbx_h{m.group(1)}, {m.group(2)}, -4;\n\tsub.u32 %__sbx_o, %__sbx_h{m.group(1)}, %__sbx_sl;\n', s)
    s = '\n'.join(re.sub(r'\[%__sbx_(\w+)', r'[%__sbx_h\1', l) if '.shared' in l else l for l in s.split('\n'))
    return s.replace('\t.reg .pred %__sbx_gq<4>;', '\t.reg .pred %__sbx_gq<4>;\n\t.reg .b32 %__sbx_ha, %__sbx_hg<4>;')
def c(s):
    s = b(s)
    s = re.sub(r'(\tsetp\.lt\.u32 %__sbx_gq(\d+), %__sbx_o, %__sbx_sn\d+;\n)',
               r'\1\tselp.b32 %__sbx_hg\2, %__sbx_hg\2, %__sbx_sl, %__sbx_gq\2;\n', s)
    return re.sub(r'\t@%__sbx_gq\d+ (ld\.shared)', r'\t\1', s)
for name, f in [('B', b), ('C', c)]:
    open(f'{sys.argv[2]}/matmul_tiled.{name}.ptx', 'w').write(f(src))
# C64: C's unpredicated loads, with the 64-bit group registers kept.
s = re.sub(r'(\tsetp\.lt\.u32 %__sbx_gq(\d+), %__sbx_o, %__sbx_sn\d+;\n)',
           r'\1\tselp.b64 %__sbx_g\2, %__sbx_g\2, %__sbx_slo, %__sbx_gq\2;\n', src)
open(f'{sys.argv[2]}/matmul_tiled.C64.ptx', 'w').write(re.sub(r'\t@%__sbx_gq\d+ (ld\.shared)', r'\t\1', s))
