# s29 call 3: seed 3016, a legal generated program reported fenced on NVIDIA only (call 2).
# s28's harness (../../2026-12-04-s28/seed57/run2.py): as written, rewritten (:g) and its skip copy (:gs), at each JIT level;
# sbxk3016.ptx numbers each fault site (f = 1000 + k, and the fault word stores f); then the
# conformance reducer on it.
d=bench/h200-runs/2026-12-04-s29/seed3016
source scripts/lib/gpu-bin.sh; gpu_suites_ready
( cd $d; for o in "" 0 1 2 3; do echo "== JIT_O=${o:-default}"; env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 3016 g3016.ptx sbx3016.ptx:g sbx3016.ptx:gs sbxk3016.ptx:g sbxk3016.ptx:gs; done ) > $OUT/variants.txt 2>&1
export GPUHOST_DRIVER=nvidia
bin=$(grep "(crates/conformance)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/conformance && CARGO_MANIFEST_DIR=$PWD SANDBOX_GEN_SEEDS=3016 SANDBOX_GEN_REDUCE=1 SANDBOX_GEN_REDUCE_S=120 timeout 200 ../../.gpu/bin/$bin --exact generated::generated_programs_give_their_bytes_as_written_rewritten_on_the_driver --nocapture) > $OUT/reduce3016.log 2>&1
cat $OUT/variants.txt; grep -E "reduced|test result" $OUT/reduce3016.log | head
