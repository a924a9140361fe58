# s30: how often gpuhost's suite, with the foreign-reset-during-transfers test in it (it is
# normally run apart: scripts/lib/gpu-bin.sh), crashes on the H200, and where. Plain runs count
# the crashes; runs under cuda-gdb (the GPU machine has no plain gdb) print every thread's
# backtrace at a SIGSEGV (frames of the stripped binary: scripts/lib/symbolize.py names them).
set -u
source scripts/lib/gpu-bin.sh
export GPUHOST_DRIVER=nvidia GPUHOST_GUEST_DIR=$PWD/.gpu/guests SOFTCUDA_LIB=$PWD/.gpu/lib/libsoftcuda.so
out="$OUT/segv"; mkdir -p "$out"
b=$(grep "(crates/gpuhost)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
cd crates/gpuhost; export CARGO_MANIFEST_DIR=$PWD
t0=$(date +%s)
for i in $(seq 1 ${PLAIN:-8}); do
  timeout 60 ../../.gpu/bin/$b --test-threads=1 > "$out/plain-$i.log" 2>&1
  echo "plain $i rc=$? $(grep -o 'test result.*' "$out/plain-$i.log")"
done | tee "$out/summary.txt"
for i in $(seq 1 ${GDB:-4}); do
  [ $(( $(date +%s) - t0 )) -gt ${BUDGET:-400} ] && break
  timeout 120 cuda-gdb -q -batch -ex 'set pagination off' -ex 'set cuda break_on_launch none' \
    -ex 'handle SIGPIPE nostop noprint' -ex run -ex 'info threads' -ex 'thread apply all bt 40' \
    --args ../../.gpu/bin/$b --test-threads=1 > "$out/gdb-$i.log" 2>&1
  echo "gdb $i rc=$? segv=$(grep -c 'SIGSEGV' "$out/gdb-$i.log") $(grep -o 'test result.*' "$out/gdb-$i.log")"
done | tee -a "$out/summary.txt"
cd ../..; tar -C "$OUT" -czf "$OUT/segv.tar.gz" segv && rm -rf "$out"
