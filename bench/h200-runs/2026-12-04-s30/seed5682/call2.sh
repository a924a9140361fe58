# s30 call 6: seed 5682 again (call.sh stopped at the skip copy, which this module has none of):
# the program rewritten at be4428d (sbx5682) and at 3e69bdb (sbxold5682), and the reducer's
# program (r5682; old and new rewrite it byte for byte alike), at the default JIT level and -O1.
d=bench/h200-runs/2026-12-04-s30/seed5682
cd $d
for o in "" 1; do
  echo "== JIT_O=${o:-default}"
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 g5682.ptx sbx5682.ptx:g sbxold5682.ptx:g
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 r5682.ptx sbxr5682.ptx:g sbxoldr5682.ptx:g
done 2>&1 | tee $OUT/variants2.txt
