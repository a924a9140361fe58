# s30 call 5: seed 5682, a legal generated program whose bytes differ rewritten on NVIDIA only
# (call 4: as written twice the same; loop versioning off, the same). s28's ctypes harness runs
# it as written, rewritten at be4428d (sbx5682: the shared redirect target is `mov.u64 st4, sh`)
# and at 3e69bdb (sbxold5682: `add`/`and` of the window's start), each kernel and its skip copy,
# at each JIT level; then conformance's reducer.
d=bench/h200-runs/2026-12-04-s30/seed5682
source scripts/lib/gpu-bin.sh; gpu_suites_ready
( cd $d; for o in "" 0 1 2 3; do echo "== JIT_O=${o:-default}"; env ${o:+JIT_O=$o} timeout 30 python3 ../../2026-12-04-s28/seed57/run2.py 5682 g5682.ptx sbx5682.ptx:g sbx5682.ptx:gs sbxold5682.ptx:g sbxold5682.ptx:gs; done ) > $OUT/variants.txt 2>&1
export GPUHOST_DRIVER=nvidia
bin=$(grep "(crates/conformance)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/conformance && CARGO_MANIFEST_DIR=$PWD SANDBOX_GEN_SEEDS=5682 SANDBOX_GEN_REDUCE=1 SANDBOX_GEN_REDUCE_S=${REDUCE_S:-150} timeout 220 ../../.gpu/bin/$bin --exact generated::generated_programs_give_their_bytes_as_written_rewritten_on_the_driver --nocapture) > $OUT/reduce5682.log 2>&1
cat $OUT/variants.txt; grep -E "reduced|test result" $OUT/reduce5682.log | head
