#!/usr/bin/env bash
# SASS of corpus kernels, native and PTX-sandboxed side by side (issue #9: why a rewritten kernel
# costs more on the GPU). Here: `bash scripts/sandbox-probe.sh pack` (→ .gpu/sandbox/); on the GPU
# machine (needs ptxas, cuobjdump; carry [".gpu"]): `bash scripts/probes/sass-dump.sh OUTDIR K...`
# writes K.native.sass / K.sandboxed.sass and ptxas's resource lines for each kernel K.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$1"; shift
mkdir -p "$out"
for k in "$@"; do
  for flavour in native sandboxed; do
    src=corpus/nvcc/$k.ptx
    [ "$flavour" = sandboxed ] && src=.gpu/sandbox/nvcc__$k.ptx
    ptxas -arch=sm_90 -O3 -v "$src" -o "$out/$k.$flavour.cubin" > "$out/$k.$flavour.ptxas.txt" 2>&1 \
      || { echo "$k $flavour: ptxas failed"; cat "$out/$k.$flavour.ptxas.txt"; continue; }
    cuobjdump -sass "$out/$k.$flavour.cubin" > "$out/$k.$flavour.sass"
    rm -f "$out/$k.$flavour.cubin"
    printf '%-20s %-9s %5s SASS lines; %s\n' "$k" "$flavour" "$(grep -c '/\*[0-9a-f]*\*/' "$out/$k.$flavour.sass")" \
      "$(grep -h 'Used' "$out/$k.$flavour.ptxas.txt" | tr '\n' ' ' | sed 's/ptxas info *: //g')"
  done
done
