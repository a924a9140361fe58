#!/usr/bin/env bash
# Every rewritten module (.gpu/sandbox/, from `bash scripts/sandbox-probe.sh pack` here) through
# ptxas -O3 on the GPU machine, and sass-uniform.py on each: whether any function reads a value
# its fences trust (base, size, globals, ctl) straight from a uniform register, which ptxas was
# seen letting a divergent sibling path overwrite (docs/ISOLATION.md, "A fourth"). Prints one line
# per function that fails and a count; exits 1 if any does. Needs ptxas and cuobjdump.
set -uo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.gpu/sandbox}"
tmp=$(mktemp -d)
modules=0; failed=0
for ptx in "$dir"/*.ptx; do
  b=$(basename "$ptx" .ptx)
  modules=$((modules + 1))
  if ! ptxas -arch=sm_90 -O3 "$ptx" -o "$tmp/$b.cubin" 2> "$tmp/$b.err"; then
    echo "$b: ptxas failed: $(head -2 "$tmp/$b.err")"; failed=$((failed + 1)); continue
  fi
  cuobjdump -sass "$tmp/$b.cubin" > "$tmp/$b.sass"
  if ! python3 scripts/probes/sass-uniform.py "$ptx" "$tmp/$b.sass" > "$tmp/$b.txt"; then
    failed=$((failed + 1)); sed "s/^/$b: /" "$tmp/$b.txt" | grep -v ": ok;"
  fi
done
rm -rf "$tmp"
echo "sass-uniform: $modules modules, $failed with a trusted value read from a uniform register"
[ "$failed" = 0 ]
