#!/usr/bin/env bash
# Runs each test of one packed suite in a process of its own, on the GPU machine (carry [".gpu"]):
# a test that crashes the process (a segfault inside a driver) then hides no other test's
# result, and every failure's output is kept whole.
#   bash scripts/probes/each-test.sh conformance [NAME_FILTER]  > each.log
# Prints "ok|FAILED|CRASHED(rc) name" per test, each failure's output after it, and a count last.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
crate=${1:?crate folder under crates/, e.g. conformance}; filter=${2:-}
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia} GPUHOST_GUEST_DIR="$PWD/.gpu/guests"
export SOFTCUDA_LIB="$PWD/.gpu/lib/libsoftcuda.so"
bin=$(grep "(crates/$crate)\"" .gpu/run.sh | grep -o "all-[0-9a-f]*" | head -1)
[ -n "$bin" ] || { echo "no packed suite for crates/$crate in .gpu/run.sh"; exit 2; }
root=$PWD; dir="$root/crates/$crate"; pass=0; fail=0
for t in $(cd "$dir" && CARGO_MANIFEST_DIR="$dir" "$root/.gpu/bin/$bin" --list --include-ignored "$filter" 2>/dev/null | sed -n 's/: test$//p'); do
  log=$(cd "$dir" && CARGO_MANIFEST_DIR="$dir" timeout 60 "$root/.gpu/bin/$bin" --include-ignored --exact "$t" --nocapture 2>&1); rc=$?
  if [ $rc = 0 ]; then echo "ok $t"; pass=$((pass + 1)); continue; fi
  fail=$((fail + 1))
  if [ $rc = 101 ]; then echo "FAILED $t"; else echo "CRASHED($rc) $t"; fi
  echo "$log" | grep -vE '^running 1 test|^test result|^$' | sed 's/^/    /' | tail -25
done
echo "each-test $crate: $pass passed, $fail failed"
