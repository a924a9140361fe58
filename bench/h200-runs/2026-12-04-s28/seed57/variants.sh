# s28 device call: seed 57's rewritten programs (full and reduced) at each JIT level, as rewritten
# and with the call-site polls moved after the return-value load (`_after`) or deleted (`_none`).
cd "$(dirname "$0")"
for o in "" 0 1 2 3; do
  echo "== JIT_O=${o:-default}"
  env ${o:+JIT_O=$o} timeout 60 python3 run2.py 57 r57.ptx sbxr57.ptx:g sbxr57_after.ptx:g sbxr57_none.ptx:g sbxr57.ptx:gs sbxr57_after.ptx:gs
  env ${o:+JIT_O=$o} timeout 60 python3 run2.py 57 g57.ptx sbx57.ptx:g sbx57.ptx:gs sbx57_after.ptx:gs sbx57_none.ptx:gs sbx57p1.ptx:g sbx57p1_after.ptx:g sbx57p1_none.ptx:g
done
