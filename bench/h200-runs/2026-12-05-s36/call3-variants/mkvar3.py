# s36: from v3_all (seed 8100 reduced, rewritten, seven constructs already undone), undo the rest.
import re, sys
A=open('/tmp/r/var2/v3_all.ptx').read().split('\n')
orig=open('/tmp/r/in/red.ptx').read()
def stores(L):  # final stores' fences: straight to their own addresses
    out=[]
    for l in L:
        l=l.replace('st.global.u32 [%__sbx_g1], %r10;','st.global.u32 [%rd3+56], %r10;').replace('st.global.u32 [%__sbx_g1+4], %r11;','st.global.u32 [%rd3+60], %r11;').replace('st.global.u32 [%__sbx_g1+8], %r12;','st.global.u32 [%rd3+64], %r12;').replace('st.global.u64 [%__sbx_a], %rd4;','st.global.u64 [%rd3+88], %rd4;')
        out.append(l)
    return out
def loads(L):
    return [l.replace('ld.global.v2.u32 {%r12, %v0}, [%__sbx_a];','ld.global.v2.u32 {%r12, %v0}, [%a1];').replace('ld.global.v4.u32 {%v0, %r12, %v1, %r4}, [%__sbx_a];','ld.global.v4.u32 {%v0, %r12, %v1, %r4}, [%a1];').replace('ld.global.v4.u32 {%v0, %r11, %v1, %r4}, [%__sbx_a];','ld.global.v4.u32 {%v0, %r11, %v1, %r4}, [%a1];').replace('ld.global.u32 %z, [%__sbx_a];','ld.global.u32 %z, [%a1];') for l in L]
def local(L):
    return [re.sub(r'@%__sbx_gq0 st\.local\.v4\.u32 \[%__sbx_g0(\+\d+)?\]', lambda m:'st.local.v4.u32 [%a1'+(m.group(1) or '')+']', l) for l in L]
def shared(L):
    return [l.replace('@%__sbx_q st.shared.v2.u32 [%__sbx_a], {%r8, %r9};','st.shared.v2.u32 [%a1], {%r8, %r9};') for l in L]
def flag(L):
    return [l for l in L if 'mov.u32 %__sbx_f, 1;' not in l and 'st.volatile.global.u32 [%__sbx_ctl+2097152]' not in l]
def zeroing(L):  # the fenced predicated load's zeroing of its registers when out of bounds
    return [l for l in L if not re.match(r'\s*@%__sbx_p mov\.b32 %(v0|r13|v1|r4), 0;', l)]
T=[('stores',stores),('loads',loads),('local',local),('shared',shared),('flag',flag),('zeroing',zeroing)]
def w(n,L): open(n+'.ptx','w').write('\n'.join(L))
w('a0_all', A)
for k,f in T: w('a1_only_'+k, f(A))
M=A; acc=''
for i,(k,f) in enumerate(T):
    M=f(M); acc+=('+' if acc else '')+k; w('a2_%d_%s'%(i,acc), M)
