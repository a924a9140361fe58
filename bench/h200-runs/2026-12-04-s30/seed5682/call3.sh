# s30 call 7: two ablations of the reducer's program rewritten (sbxr5682): a1, the generic store
# of the jump table's second target sent straight to its global fence (its isspacep dispatch
# deleted); a2, every poll's `exit` deleted. Default JIT level.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxr5682a1.ptx:g sbxr5682a2.ptx:g 2>&1 | tee $OUT/variants3.txt
