# s30 call 11: the first jump table's search of compares (sandbox/jumps.rs) written as a chain of
# equality compares (j), or as the `brx.idx` it was (b). Default JIT level.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxr5682j.ptx:g sbxr5682b.ptx:g 2>&1 | tee $OUT/variants7.txt
