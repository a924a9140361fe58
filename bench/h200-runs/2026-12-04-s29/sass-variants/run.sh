# s29: ptxas -O3 sm_90 on each variant; registers, SASS, loop sizes. On the GPU machine.
cd "$(dirname "$0")"
mkdir -p "$OUT/v"
for f in matmul_tiled.*.ptx; do
  v=${f%.ptx}
  ptxas -arch=sm_90 -O3 -v "$f" -o "$OUT/v/$v.cubin" > "$OUT/v/$v.ptxas.txt" 2>&1 || { echo "$v: ptxas failed"; cat "$OUT/v/$v.ptxas.txt"; continue; }
  cuobjdump -sass "$OUT/v/$v.cubin" > "$OUT/v/$v.sass"; rm "$OUT/v/$v.cubin"
  echo "$v: $(grep -h Used "$OUT/v/$v.ptxas.txt" | sed 's/ptxas info *: //' | tr '\n' ' ') LDS.128: $(grep -c 'LDS.128' "$OUT/v/$v.sass")"
  python3 ../../../../scripts/probes/sass-loops.py "$OUT/v/$v.sass"
done
tar -C "$OUT" -czf "$OUT/v.tar.gz" v && rm -rf "$OUT/v"
