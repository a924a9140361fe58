# s28 device call: which of the sandbox's features, taken out, makes seed 57 right under NVIDIA's JIT.
cd "$(dirname "$0")"
for o in "" 1; do
  echo "== JIT_O=${o:-default}"
  env ${o:+JIT_O=$o} timeout 60 python3 run2.py 57 r57.ptx sbxr57.ptx:g sbxr57_noexit.ptx:g sbxr57_noclamp.ptx:g sbxr57_slowonly.ptx:g sbxr57_fastonly.ptx:g sbxr57_nopoll.ptx:g sbxr57_nobp.ptx:g
  env ${o:+JIT_O=$o} timeout 60 python3 run2.py 57 g57.ptx sbx57.ptx:gs sbx57_noexit.ptx:gs sbx57_noclamp.ptx:gs sbx57_slowonly.ptx:gs sbx57_fastonly.ptx:gs sbx57_nopoll.ptx:gs sbx57_nobp.ptx:gs
done
