# s30 call 8: the loop versioning's `bra.uni` out of the fast copy (sandbox/version.rs) written
# as a plain `bra` (the `u` files), in the reducer's program and in the whole one, against the
# rewrite as it is. Default JIT level.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxr5682u.ptx:g 2>&1 | tee $OUT/variants4.txt
timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 g5682.ptx sbx5682.ptx:g sbx5682u.ptx:g 2>&1 | tee -a $OUT/variants4.txt
