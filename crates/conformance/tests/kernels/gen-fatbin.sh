#!/usr/bin/env bash
# Regenerates the fatbin fixtures of the conformance fatbin test from spin_until.cu:
#   spin_until.ptx.fatbin    compute_80 PTX only, uncompressed: softcuda and an H200 both load it
#   spin_until.sm_80.fatbin  sm_80 SASS only: nothing an H200 (sm_90) or softcuda can run
#   spin_until.ptx.MODE.fatbin  compute_80 PTX, compressed by nvcc: MODE `all` is the classic
#                            `-Xfatbin=-compress-all`; `size`, `speed` and `balance` are CUDA 12.8's
#                            --compress-mode choices (with -compress-all, so small PTX is compressed too)
#   spin_until.sm_90.fatbin      nvcc's defaults for `-arch=sm_90`: SASS and PTX, as a real build has
# With nvcc (run it on the GPU machine) they are nvcc's own fatbins. Without nvcc they are built
# here from spin_until.ptx in the documented fatbin layout (16-byte header, 64-byte entry headers
# plus 8 bytes of ptxas options for PTX; see softcuda's image.rs), the cubin entry holding only
# an ELF header stub: enough for a driver that reads the entry's target first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ -x "$nvcc" ]; then
    "$nvcc" -fatbin -no-compress -gencode arch=compute_80,code=compute_80 \
        -o "$here/spin_until.ptx.fatbin" "$here/spin_until.cu"
    "$nvcc" -fatbin -no-compress -gencode arch=compute_80,code=sm_80 \
        -o "$here/spin_until.sm_80.fatbin" "$here/spin_until.cu"
    "$nvcc" -fatbin -Xfatbin=-compress-all -gencode arch=compute_80,code=compute_80 \
        -o "$here/spin_until.ptx.all.fatbin" "$here/spin_until.cu"
    for mode in size speed balance; do
        "$nvcc" -fatbin --compress-mode="$mode" -Xfatbin=-compress-all \
            -gencode arch=compute_80,code=compute_80 \
            -o "$here/spin_until.ptx.$mode.fatbin" "$here/spin_until.cu"
    done
    "$nvcc" -fatbin -arch=sm_90 -o "$here/spin_until.sm_90.fatbin" "$here/spin_until.cu"
    exit 0
fi
python3 - "$here" <<'PY'
import struct, sys
here = sys.argv[1]

def entry(kind, payload, header):
    padded = (len(payload) + 7) // 8 * 8
    head = struct.pack('<HHIQIIHHIIIQQQ', kind, 0x0101, header, padded, 0,
                       64 if kind == 1 else 0, 0, 0, 80, 0, 0, 0x11, 0, 0)
    return head + bytes(header - len(head)) + payload + bytes(padded - len(payload))

def fatbin(entries):
    body = b''.join(entries)
    return struct.pack('<IHHQ', 0xBA55ED50, 1, 16, len(body)) + body

ptx = open(f'{here}/spin_until.ptx', 'rb').read() + b'\0'
open(f'{here}/spin_until.ptx.fatbin', 'wb').write(fatbin([entry(1, ptx, 72)]))
elf = b'\x7fELF\x02\x01\x01\x33' + bytes(56)
open(f'{here}/spin_until.sm_80.fatbin', 'wb').write(fatbin([entry(2, elf, 64)]))
PY
