source scripts/lib/gpu-bin.sh; gpu_suites_ready
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR=$PWD/.gpu/guests SOFTCUDA_LIB=$PWD/.gpu/lib/libsoftcuda.so
d=bench/h200-runs/2026-12-04-s28/seed57
( cd $d; for o in "" 0 1 2 3; do echo "== JIT_O=${o:-default}"; for w in 6 8; do env ${o:+JIT_O=$o} timeout 30 python3 run.py 57 $w g57.ptx sbx57.ptx:g sbx57p1.ptx:g; done; done ) > $OUT/variants.txt 2>&1
timeout 150 bash scripts/probes/crash-bt.sh gpuhost context_loss::foreign_resets_during 3 > $OUT/crash-bt.log 2>&1
for i in 1 2; do GPUHOST_BIN=.gpu/bin/gpuhost GUEST_WASM=.gpu/guests/http_misbehave.wasm timeout 60 bash scripts/bench-module-cache.sh 500 > $OUT/module-cache-$i.txt 2>&1; done
bin=$(grep "(crates/conformance)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
(cd crates/conformance && CARGO_MANIFEST_DIR=$PWD SANDBOX_GEN_SEEDS=57 SANDBOX_GEN_REDUCE=1 SANDBOX_GEN_REDUCE_S=100 timeout 200 ../../.gpu/bin/$bin --exact generated::generated_programs_give_their_bytes_as_written_rewritten_on_the_driver --nocapture) > $OUT/reduce57.log 2>&1
cat $OUT/variants.txt; grep -E "round|crash|no crash" $OUT/crash-bt.log | head; cat $OUT/module-cache-*.txt; grep -E "reduced|test result" $OUT/reduce57.log | head
