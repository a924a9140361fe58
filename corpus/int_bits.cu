// int_bits: integer-heavy lane work. For each i, ten u32 results at out[10*i ..]:
// popc, clz, brev, bfe.u32, bfe.s32, bfi, prmt, mul.hi.u32, signed div, signed rem.
#include "compat.h"

extern "C" __global__ void int_bits(const unsigned *__restrict__ a, const unsigned *__restrict__ b,
                                    unsigned *__restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i];
    unsigned pos = y & 63, len = (y >> 6) & 63; // deliberately spans past bit 31
    unsigned *o = out + 10 * i;
    o[0] = (unsigned)__popc(x);
    o[1] = (unsigned)__clz((int)x);
    o[2] = __brev(x);
    o[3] = ptx_bfe_u32(x, pos, len);
    o[4] = (unsigned)ptx_bfe_s32((int)x, pos, len);
    o[5] = ptx_bfi_b32(x, y, (y >> 12) & 63, (y >> 18) & 63);
    o[6] = ptx_prmt_b32(x, y, y >> 16);
    o[7] = __umulhi(x, y);
    int d = (int)((y >> 1) | 1u); // positive, never zero: no overflow, no division by zero
    o[8] = (unsigned)((int)x / d);
    o[9] = (unsigned)((int)x % d);
}
