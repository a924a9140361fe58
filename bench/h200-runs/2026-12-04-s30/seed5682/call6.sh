# s30 call 10: each versioned loop's check in registers of its own (r: %gpuhost_w<i>_<k>,
# %gpuhost_wp<i>) rather than the function's shared %gpuhost_vd<4> / %gpuhost_vp.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
for o in "" 1; do env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxr5682r.ptx:g; done 2>&1 | tee $OUT/variants6.txt
