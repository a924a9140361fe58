# s30 call 12: SASS of the reducer's program rewritten (sbxr5682) at ptxas -O3 and -O1, and of
# s0 (its first versioned loop sent to its slow copy: right at -O3), for the failing store.
cd bench/h200-runs/2026-12-04-s30/seed5682 && python3 variants.py
mkdir -p $OUT/sass
for v in sbxr5682:3 sbxr5682:1 sbxr5682s0:3; do
  f=${v%:*}; o=${v#*:}
  ptxas -arch=sm_90 -O$o "$f.ptx" -o /tmp/$f.O$o.cubin 2> $OUT/sass/$f.O$o.ptxas.txt && cuobjdump -sass /tmp/$f.O$o.cubin > $OUT/sass/$f.O$o.sass
  echo "$f -O$o: $(grep -c '/\*[0-9a-f]*\*/' $OUT/sass/$f.O$o.sass) lines"
done
tar -C $OUT -czf $OUT/sass.tar.gz sass && rm -rf $OUT/sass
