# s31 call 1: the workaround to try (variants.py: fences against the `size` parameter itself), in
# the reduced and the whole program of seed 5682, against session 30's rewrite, at the default
# JIT level and -O3; then ptxas -O3 SASS of both reduced programs, and where each reads its limit.
cd bench/h200-runs/2026-12-04-s31/seed5682 && python3 variants.py
s30=../../2026-12-04-s30/seed5682
for o in "" 3; do
  echo "== JIT_O=${o:-default}"
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 $s30/r5682.ptx $s30/sbxr5682.ptx:g sbxr5682p.ptx:g
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 $s30/g5682.ptx $s30/sbx5682.ptx:g sbx5682p.ptx:g
done 2>&1 | tee $OUT/variants1.txt
mkdir -p $OUT/sass
for f in $s30/sbxr5682.ptx sbxr5682p.ptx sbx5682p.ptx; do
  b=$(basename $f .ptx)
  ptxas -arch=sm_90 -O3 $f -o /tmp/$b.cubin 2> $OUT/sass/$b.ptxas.txt && cuobjdump -sass /tmp/$b.cubin > $OUT/sass/$b.sass
  echo "$b: $(grep -c 'UMOV UR[0-9]*, 0x' $OUT/sass/$b.sass) UMOV imm; $(grep -c 'c\[0x0\]\[0x238\]' $OUT/sass/$b.sass) reads of size's c[0x0][0x238]"
done
tar -C $OUT -czf $OUT/sass.tar.gz sass && rm -rf $OUT/sass
