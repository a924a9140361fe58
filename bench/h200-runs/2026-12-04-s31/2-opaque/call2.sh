# s31 call 2: the rewrite with opaque hidden values (poll.rs, build_head: every value a fence,
# a relocated global or a poll trusts gets `lanemask_lt & lanemask_eq` added, so ptxas cannot
# hold it in a uniform register). Call 3 ran it again as V=y: one limit for every width, and the
# zero from one special register (`lanemask_lt & (lanemask_lt + 1)`); seed5682/sbx*y.ptx.
# Seed 5682 rewritten by it (seed5682/sbx*z.ptx, from
# sandbox_dump here), whole and reduced, at every JIT level; the SASS of both at -O3 and where
# the fences read base and limit; then s29's verify.sh (the suites, sandbox_bench twice, the
# graph-heavy kernels' SASS, generated programs from seed $SEED).
set -u
d=bench/h200-runs/2026-12-04-s31/seed5682
s30=bench/h200-runs/2026-12-04-s30/seed5682
( cd $d; for o in "" 0 1 2 3; do echo "== JIT_O=${o:-default}"
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 ../../2026-12-04-s30/seed5682/r5682.ptx sbxr5682${V:-z}.ptx:g
  env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 ../../2026-12-04-s30/seed5682/g5682.ptx sbx5682${V:-z}.ptx:g
done ) > $OUT/seed5682.txt 2>&1
mkdir -p $OUT/sass5682
for f in sbxr5682${V:-z} sbx5682${V:-z}; do
  ptxas -arch=sm_90 -O3 $d/$f.ptx -o /tmp/$f.cubin 2> $OUT/sass5682/$f.ptxas.txt && cuobjdump -sass /tmp/$f.cubin > $OUT/sass5682/$f.sass
  cuobjdump -res-usage /tmp/$f.cubin 2>&1 | grep -o "REG:[0-9]*" >> $OUT/sass5682/$f.ptxas.txt
done
tar -C $OUT -czf $OUT/sass5682.tar.gz sass5682 && rm -rf $OUT/sass5682
cat $OUT/seed5682.txt
SEED=${SEED:-6000} CASES=${CASES:-500} bash bench/h200-runs/2026-12-04-s29/verify.sh
