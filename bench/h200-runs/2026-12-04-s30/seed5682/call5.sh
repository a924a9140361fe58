# s30 call 9: which versioned loop: the reducer's program rewritten, with one loop's version
# check made an unconditional branch to its slow (original, polled) copy (s0 = the first
# `@!%gpuhost_vp bra` in the text, ... s5), and with all six (sall). Default JIT level.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxr5682s0.ptx:g sbxr5682s1.ptx:g sbxr5682s2.ptx:g sbxr5682s3.ptx:g sbxr5682s4.ptx:g sbxr5682s5.ptx:g sbxr5682sall.ptx:g 2>&1 | tee $OUT/variants5.txt
