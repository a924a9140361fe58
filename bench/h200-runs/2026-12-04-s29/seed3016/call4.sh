# s29 call 4: seed 3016 ablations (numbered fault sites): sbxa = every brx.idx as compare-and-branch
# chains; sbxb = every poll's `@%__sbx_p exit` deleted.
d=bench/h200-runs/2026-12-04-s29/seed3016
( cd $d; for o in "" 3; do echo "== JIT_O=${o:-default}"; env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 3016 g3016.ptx sbxk3016.ptx:g sbxk3016.ptx:gs sbxa3016.ptx:g sbxa3016.ptx:gs sbxb3016.ptx:g sbxb3016.ptx:gs; done ) > $OUT/ablate.txt 2>&1
cat $OUT/ablate.txt
