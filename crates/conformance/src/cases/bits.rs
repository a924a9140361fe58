//! Cases for f16/bf16 conversions, integer bit operations, device-function calls and divergence.
//! All exact: the references implement PTX's documented semantics bit for bit.

use half::{bf16, f16};

use crate::case::{BufferSpec, Case, blocks_for, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;

/// Floats that exercise f16 rounding: ordinary values, f16 overflow (→ ±inf, or 65504 just
/// below the rounding threshold), f16 subnormals and underflow to zero, signed zeros, infinities.
/// No NaN: payload propagation is not specified identically by every converter.
fn conversion_input(r: &mut Rng) -> f32 {
    match r.range_u32(0, 10) {
        0 => r.range_f32(-70_000.0, 70_000.0),
        1 => r.range_f32(-1e-5, 1e-5),
        2 => r.range_f32(-1e-8, 1e-8),
        3 => [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            65504.0,
            65519.0,
            65520.0,
            -65520.0,
        ][r.range_u32(0, 8) as usize],
        _ => r.range_f32(-10.0, 10.0),
    }
}

/// f32 → f16 (round to nearest even) → f32, and f32 → bf16 (round to nearest even).
pub fn f16_convert(rng: &mut Rng) -> Case {
    let n = 4_099;
    let x: Vec<f32> = rng.vec(n, conversion_input);
    let h: Vec<u16> = x.iter().map(|v| f16::from_f32(*v).to_bits()).collect();
    let back: Vec<f32> = h.iter().map(|b| f16::from_bits(*b).to_f32()).collect();
    let bf: Vec<u16> = x.iter().map(|v| bf16::from_f32(*v).to_bits()).collect();
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 128), 128),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("f16", Expect::U16(h)),
            BufferSpec::output(
                "back",
                Expect::F32 {
                    want: back,
                    tol: Tolerance::EXACT,
                },
            ),
            BufferSpec::output("bf16", Expect::U16(bf)),
        ],
        n,
    )
}

/// An f16 in [-4, 4] with magnitude ≥ 2⁻⁶ (or zero), so that a·b + c is exact in f64 and the
/// reference's single rounding to f16 is the correctly rounded fma.
fn fma_operand(r: &mut Rng) -> f16 {
    let v = r.range_f32(-4.0, 4.0);
    f16::from_f32(if v.abs() < 1.0 / 64.0 { 0.0 } else { v })
}

/// `x` rounded to the nearest f16, ties to even, in one rounding. `half`'s `f16::from_f64` goes
/// through f32 on x86 with F16C, and that double rounding is one ulp off when the f32 lands on an
/// f16 tie; the neighbours of its answer are compared with `x` exactly (in f64) instead.
fn f16_nearest(x: f64) -> f16 {
    let h = f16::from_f64(x);
    if !x.is_finite() || !h.is_finite() {
        return h;
    }
    let b = h.to_bits();
    [b.wrapping_sub(1), b, b.wrapping_add(1)]
        .into_iter()
        .map(f16::from_bits)
        .filter(|c| c.is_finite())
        .min_by(|p, q| {
            let (dp, dq) = ((p.to_f64() - x).abs(), (q.to_f64() - x).abs());
            dp.total_cmp(&dq)
                .then((p.to_bits() & 1).cmp(&(q.to_bits() & 1)))
        })
        .unwrap_or(h)
}

/// d = fma.rn.f16(a, b, c), exact against a correctly rounded reference.
pub fn f16_fma(rng: &mut Rng) -> Case {
    let n = 2_053;
    let a: Vec<f16> = rng.vec(n, fma_operand);
    let b: Vec<f16> = rng.vec(n, fma_operand);
    let c: Vec<f16> = rng.vec(n, fma_operand);
    let d: Vec<u16> = (0..n)
        .map(|i| f16_nearest(a[i].to_f64() * b[i].to_f64() + c[i].to_f64()).to_bits())
        .collect();
    let bits = |v: &[f16]| bytes_of(&v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>());
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 256), 256),
        vec![
            BufferSpec::input("a", bits(&a)),
            BufferSpec::input("b", bits(&b)),
            BufferSpec::input("c", bits(&c)),
            BufferSpec::output("d", Expect::U16(d)),
        ],
        n,
    )
}

/// PTX `bfe.u32`/`bfe.s32`: position and length taken mod 256; bits past bit 31 read as zero
/// (unsigned) or the field's top bit (signed).
pub fn bfe(a: u32, pos: u32, len: u32, signed: bool) -> u32 {
    let (pos, len) = (pos & 0xff, len & 0xff);
    let sbit = if !signed || len == 0 {
        0
    } else {
        (a >> (pos + len - 1).min(31)) & 1
    };
    let mut d = 0u32;
    for i in 0..32 {
        let bit = if i < len && pos + i <= 31 {
            (a >> (pos + i)) & 1
        } else {
            sbit
        };
        d |= bit << i;
    }
    d
}

/// PTX `bfi.b32 f, a, b, pos, len`: insert the low `len` bits of `a` into `b` at `pos`.
pub fn bfi(a: u32, b: u32, pos: u32, len: u32) -> u32 {
    let (pos, len) = (pos & 0xff, len & 0xff);
    let mut f = b;
    let mut i = 0;
    while i < len && pos + i <= 31 {
        f = (f & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
        i += 1;
    }
    f
}

/// PTX `prmt.b32` default mode: each result byte picks one of the 8 bytes of {b, a} by the low
/// 3 bits of its selector nibble; bit 3 replicates that byte's sign bit instead.
pub fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let src = (u64::from(b) << 32) | u64::from(a);
    let mut d = 0u32;
    for k in 0..4 {
        let nib = (sel >> (4 * k)) & 0xf;
        let byte = ((src >> (8 * (nib & 7))) & 0xff) as u32;
        let byte = if nib & 8 != 0 {
            if byte & 0x80 != 0 { 0xff } else { 0 }
        } else {
            byte
        };
        d |= byte << (8 * k);
    }
    d
}

/// The ten results int_bits.cu writes per element, in its order.
pub fn int_bits_reference(x: u32, y: u32) -> [u32; 10] {
    let d = ((y >> 1) | 1) as i32;
    [
        x.count_ones(),
        x.leading_zeros(),
        x.reverse_bits(),
        bfe(x, y & 63, (y >> 6) & 63, false),
        bfe(x, y & 63, (y >> 6) & 63, true),
        bfi(x, y, (y >> 12) & 63, (y >> 18) & 63),
        prmt(x, y, y >> 16),
        ((u64::from(x) * u64::from(y)) >> 32) as u32,
        (x as i32).wrapping_div(d) as u32,
        (x as i32).wrapping_rem(d) as u32,
    ]
}

/// popc, clz, brev, bfe, bfi, prmt, mul.hi, div, rem on random words (plus 0 and all-ones).
pub fn int_bits(rng: &mut Rng) -> Case {
    let n = 3_001;
    let word = |r: &mut Rng| match r.range_u32(0, 16) {
        0 => 0,
        1 => u32::MAX,
        2 => 0x8000_0000,
        _ => r.next_u32(),
    };
    let a: Vec<u32> = rng.vec(n, word);
    let b: Vec<u32> = rng.vec(n, word);
    let want: Vec<u32> = a
        .iter()
        .zip(&b)
        .flat_map(|(x, y)| int_bits_reference(*x, *y))
        .collect();
    Case::a_b_to_out(n, bytes_of(&a), bytes_of(&b), Expect::U32(want))
}

/// Collatz steps of `x`, capped at `limit`, with u32 wrap-around as in the kernel.
pub fn collatz_steps(mut x: u32, limit: u32) -> u32 {
    let mut steps = 0;
    while x > 1 && steps < limit {
        x = if x & 1 == 1 {
            x.wrapping_mul(3).wrapping_add(1)
        } else {
            x >> 1
        };
        steps += 1;
    }
    steps
}

/// Collatz step counts through non-inlined device functions.
pub fn device_call(rng: &mut Rng) -> Case {
    let n = 2_000;
    let x: Vec<u32> = rng.vec(n, |r| match r.range_u32(0, 8) {
        0 => r.range_u32(0, 3),
        1 => r.next_u32(),
        _ => r.range_u32(1, 200_000),
    });
    let want: Vec<u32> = x.iter().map(|v| collatz_steps(*v, 1000)).collect();
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 128), 128),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("out", Expect::U32(want)),
        ],
        n,
    )
}

/// The per-lane value of divergent.cu before the ballot.
fn divergent_lane(lane_in_block: u32, x: i32) -> i32 {
    match lane_in_block & 3 {
        0 => x.wrapping_mul(3),
        1 => (0..(x & 15)).fold(0i32, |r, k| r.wrapping_add(k ^ x)),
        2 => {
            if x < 0 {
                x.wrapping_neg()
            } else if x & 1 != 0 {
                x >> 1
            } else {
                x << 1
            }
        }
        _ => x.wrapping_sub(7),
    }
}

/// Lane- and data-divergent paths, then a full-warp ballot; 160-thread blocks, a partial last warp.
pub fn divergent(rng: &mut Rng) -> Case {
    let (n, block) = (1_000usize, 160usize);
    let grid = n.div_ceil(block);
    let x: Vec<i32> = rng.vec(n, |r| r.range_i32(-100_000, 100_000));
    let total = grid * block;
    let r: Vec<i32> = (0..total)
        .map(|i| divergent_lane((i % block) as u32, if i < n { x[i] } else { 0 }))
        .collect();
    let want: Vec<i32> = (0..n)
        .map(|i| {
            let warp_start = i - (i % block) % 32;
            let ballot = (0..32).fold(0u32, |acc, l| acc | (((r[warp_start + l] & 1) as u32) << l));
            r[i] ^ ballot as i32
        })
        .collect();
    Case::buffers_then_n(
        shape_1d(grid as u32, block as u32),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("out", Expect::I32(want)),
        ],
        n,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_reference_rounds_once_even_where_f32_would_land_on_a_tie() {
        // -(2.5 - 2^-10 - 2^-30): nearest f16 is -(2.5 - 2^-9) = 0xc0ff; rounding to f32 first
        // gives the tie -(2.5 - 2^-10), which rounds to even -2.5 = 0xc100.
        let x = -(2.5 - 2f64.powi(-10) - 2f64.powi(-30));
        assert_eq!(f16_nearest(x).to_bits(), 0xc0ff);
        // A real tie rounds to even; exact values stay exact.
        assert_eq!(f16_nearest(-(2.5 - 2f64.powi(-10))).to_bits(), 0xc100);
        assert_eq!(f16_nearest(1.0).to_bits(), 0x3c00);
        assert_eq!(f16_nearest(-0.0).to_bits(), 0x8000);
        assert_eq!(f16_nearest(2f64.powi(-25)).to_bits(), 0x0000);
        assert_eq!(f16_nearest(1.25 * 2f64.powi(-24)).to_bits(), 0x0001);
        assert_eq!(f16_nearest(1.5 * 2f64.powi(-24)).to_bits(), 0x0002);
    }

    #[test]
    fn bfe_follows_ptx_for_in_range_and_overhanging_fields() {
        assert_eq!(bfe(0xabcd_1234, 4, 8, false), 0x23);
        assert_eq!(bfe(0x0000_0f00, 8, 4, true), 0xffff_ffff);
        assert_eq!(bfe(0x8000_0000, 31, 8, true), 0xffff_ffff);
        assert_eq!(bfe(0x8000_0000, 31, 8, false), 1);
        assert_eq!(bfe(0x1234, 40, 8, false), 0);
        assert_eq!(bfe(0xffff_ffff, 3, 0, true), 0);
    }

    #[test]
    fn bfi_inserts_and_clips_at_bit_31() {
        assert_eq!(bfi(0xf, 0, 4, 4), 0xf0);
        assert_eq!(bfi(0xff, 0, 28, 8), 0xf000_0000);
        assert_eq!(bfi(0xff, 0x1234, 40, 8), 0x1234);
    }

    #[test]
    fn prmt_selects_bytes_and_replicates_signs() {
        assert_eq!(prmt(0x4433_2211, 0x8877_6655, 0x3210), 0x4433_2211);
        assert_eq!(prmt(0x4433_2211, 0x8877_6655, 0x7654), 0x8877_6655);
        assert_eq!(prmt(0x0000_0080, 0, 0x4448), 0x0000_00ff);
        assert_eq!(prmt(0x0000_0080, 0, 0x0008), 0x8080_80ff);
    }

    #[test]
    fn collatz_counts_known_values() {
        assert_eq!(collatz_steps(1, 1000), 0);
        assert_eq!(collatz_steps(6, 1000), 8);
        assert_eq!(collatz_steps(27, 1000), 111);
        assert_eq!(collatz_steps(27, 5), 5);
    }

    #[test]
    fn f16_reference_rounds_to_nearest_even_and_overflows_to_inf() {
        assert_eq!(f16::from_f32(65519.0).to_bits(), 0x7bff);
        assert_eq!(f16::from_f32(65520.0).to_bits(), 0x7c00);
        assert_eq!(f16::from_f32(1.0 + 1.0 / 2048.0).to_bits(), 0x3c00);
        assert_eq!(bf16::from_f32(1.0 + 1.0 / 256.0).to_bits(), 0x3f80);
    }
}
