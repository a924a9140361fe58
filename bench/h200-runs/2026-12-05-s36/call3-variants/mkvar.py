# s36: ablation variants of the rewritten reduced seed-8100 program (versioning/ifconvert/early off).
import re, itertools, sys
src=open(sys.argv[1]).read()
def nopolls(L):
    out=[];skip=False
    for l in L:
        if '@%__sbx_bp sub.s32 %__sbx_cnt' in l: skip=True; continue
        if skip and l.startswith('$__sbx_L'): skip=False; out.append(l); continue
        if not skip: out.append(l)
    return out
def brx(L):
    out=[];i=0
    while i<len(L):
        l=L[i]; m=re.match(r'\s*(\$G\d+): \.branchtargets (.*);',l)
        if m:
            out.append(l); out.append('\tbrx.idx %t0, '+m.group(1)+';')
            first=m.group(2).split(',')[0].strip(); i+=1
            while not L[i].startswith(first+':'): i+=1
            continue
        out.append(l); i+=1
    return out
def rep(a,b): return lambda L:[l.replace(a,b) for l in L]
def atomraw(L): return rep('atom.global.or.b32 %z, [%__sbx_a], %r6;','atom.global.or.b32 %z, [%a1], %r6;')(L)
def predload(L): return rep('@%__sbx_q ld.global.v4.u32 {%v0, %r13, %v1, %r4}, [%__sbx_a];','@!%p0 ld.global.v4.u32 {%v0, %r13, %v1, %r4}, [%a1];')(L)
def noexit(L): return rep('@%__sbx_p exit;','')(L)
def nozero(L): return rep('and.b32 %__sbx_z, %__sbx_z, %__sbx_t;','mov.u32 %__sbx_z, 0;')(L)
def noentry(L): return [l.replace('ld.volatile.global.u32 %__sbx_e, [%__sbx_ctl];','mov.u32 %__sbx_e, %__sbx_epoch;') if i<70 else l for i,l in enumerate(L)]
def loadraw(L):
    # every other fenced global load/store back to its own address register
    out=[]
    for l in L:
        m=re.match(r'(\s*)(ld|st)\.global\.(\S+) (.*)\[%__sbx_a\](.*)',l)
        out.append(l if not m else l.replace('[%__sbx_a]','[%a1]') if 'v4.u32 {%v0, %r13' not in l else l)
    return out
T={'polls':nopolls,'brx':brx,'atom':atomraw,'pload':predload,'exit':noexit,'zero':nozero,'entry':noentry}
L=src.split('\n')
def w(n,L): open(n+'.ptx','w').write('\n'.join(L))
w('v00_base',L)
for k,f in T.items(): w('v1_only_'+k,f(L))
for k in T:
    M=L
    for j,f in T.items():
        if j!=k: M=f(M)
    w('v2_allbut_'+k,M)
M=L
for f in T.values(): M=f(M)
w('v3_all',M)
