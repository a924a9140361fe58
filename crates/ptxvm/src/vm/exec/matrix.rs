//! The warp-level matrix instructions' executor: `mma` gathers every lane's fragments into
//! A, B and C (layouts in `ir::matrix`), computes D = A·B + C, and scatters D's fragments
//! back; `movmatrix` transposes an 8×8 b16 matrix across the warp.
//!
//! Precision. f16, bf16 and tf32 products are exact in f64, and each dot product is summed in
//! f64 and rounded once to the result type (round to nearest even). Tensor cores round their
//! partial sums differently, so results can differ from an NVIDIA GPU's in the last bits;
//! integer forms are exact (wrapping, or clamped with `.satfinite`), and f64 is an FMA chain
//! in `k` order. Inputs are read from every lane, active or not: `mma.sync.aligned` requires
//! the whole warp, and what an absent lane contributes is undefined there too.

use super::super::float::{from_half, to_half};
use super::super::warp::Warp;
use crate::ir::Src;
use crate::ir::matrix::{Elem, MmaOp, Part, per_lane, position};

/// Largest matrix of any shape ptxvm runs: A of `.m16n8k32`.
const MAX_ELEMS: usize = 16 * 32;

/// One element of a fragment register, as a number (integers exactly).
fn decode(ty: Elem, raw: u64) -> f64 {
    match ty {
        Elem::F16 => f64::from(from_half(raw as u16, false)),
        Elem::Bf16 => f64::from(from_half(raw as u16, true)),
        Elem::Tf32 => f64::from(f32::from_bits(raw as u32 & 0xffff_e000)),
        Elem::F32 => f64::from(f32::from_bits(raw as u32)),
        Elem::F64 => f64::from_bits(raw),
        Elem::S8 => f64::from(raw as u8 as i8),
        Elem::U8 => f64::from(raw as u8),
        Elem::S32 => f64::from(raw as u32 as i32),
    }
}

/// A result element's bits in a register of type `ty`.
fn encode(ty: Elem, x: f64, satfinite: bool) -> u64 {
    match ty {
        Elem::F16 => u64::from(to_half(x, false)),
        Elem::Bf16 => u64::from(to_half(x, true)),
        Elem::F32 | Elem::Tf32 => u64::from((x as f32).to_bits()),
        Elem::F64 => x.to_bits(),
        // Integer sums are exact in f64 (at most 32 products of 8-bit values plus an s32).
        _ if satfinite => {
            u64::from((x.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32) as u32)
        }
        _ => u64::from((x as i64) as u32),
    }
}

impl Warp {
    /// One lane-major matrix of `part` (`rows`×`cols`) from the fragments in `regs`.
    fn gather(
        &self,
        op: &MmaOp,
        part: Part,
        ty: Elem,
        regs: &[Src],
        cols: usize,
    ) -> [f64; MAX_ELEMS] {
        let mut out = [0f64; MAX_ELEMS];
        let (per, bits) = (ty.per_reg(), ty.bits());
        let mut vals = [[0u64; 32]; 4];
        for (v, s) in vals.iter_mut().zip(regs) {
            *v = self.rd(*s);
        }
        for lane in 0..32 {
            for i in 0..per_lane(op.shape, part) {
                let Some(reg) = vals[..regs.len()].get(i / per) else {
                    continue;
                };
                let raw = if bits == 64 {
                    reg[lane]
                } else {
                    (reg[lane] >> ((i % per) as u32 * bits)) & ((1u64 << bits) - 1)
                };
                let (r, c) = position(op.shape, part, ty, lane, i);
                out[r * cols + c] = decode(ty, raw);
            }
        }
        out
    }

    /// Executes `mma` for the lanes in `mask` (their D registers are written).
    pub(super) fn mma(&mut self, op: &MmaOp, mask: u32) {
        let (m, n, k) = op.shape.mnk();
        let a = self.gather(op, Part::A, op.a_ty, &op.a, k);
        let b = self.gather(op, Part::B, op.b_ty, &op.b, n);
        let c = self.gather(op, Part::C, op.c_ty, &op.c, n);
        let mut d = [0f64; 16 * 8];
        for r in 0..m {
            for col in 0..n {
                let dot = (0..k).map(|x| (a[r * k + x], b[x * n + col]));
                d[r * n + col] = if op.d_ty == Elem::F64 {
                    dot.fold(c[r * n + col], |acc, (p, q)| p.mul_add(q, acc))
                } else {
                    c[r * n + col] + dot.map(|(p, q)| p * q).sum::<f64>()
                };
            }
        }
        let (per, bits) = (op.d_ty.per_reg(), op.d_ty.bits());
        let regs = crate::ir::matrix::regs(op.shape, Part::C, op.d_ty);
        for (j, &dreg) in op.d.iter().enumerate().take(regs) {
            let mut out = [0u64; 32];
            for (lane, word) in out.iter_mut().enumerate() {
                for e in 0..per {
                    let i = j * per + e;
                    if i >= per_lane(op.shape, Part::C) {
                        break;
                    }
                    let (r, col) = position(op.shape, Part::C, op.d_ty, lane, i);
                    let v = encode(op.d_ty, d[r * n + col], op.satfinite);
                    *word |= if bits == 64 {
                        v
                    } else {
                        v << (e as u32 * bits)
                    };
                }
            }
            self.wr(dreg, &out, mask);
        }
    }

    /// Executes `movmatrix.sync.aligned.m8n8.trans.b16`: lane `l` holds row `l / 4`, columns
    /// `2(l % 4)` and `2(l % 4) + 1`, before and after.
    pub(super) fn movmatrix(&mut self, d: crate::ir::Reg, a: Src, mask: u32) {
        let av = self.rd(a);
        let elem = |r: usize, c: usize| (av[r * 4 + c / 2] >> (16 * (c % 2))) & 0xffff;
        let mut out = [0u64; 32];
        for (lane, word) in out.iter_mut().enumerate() {
            let (row, col) = (lane >> 2, (lane & 3) * 2);
            *word = elem(col, row) | (elem(col + 1, row) << 16);
        }
        self.wr(d, &out, mask);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::matrix::Shape;

    #[test]
    fn integer_results_wrap_or_clamp_as_asked() {
        assert_eq!(encode(Elem::S32, -1.0, false), 0xffff_ffff);
        assert_eq!(encode(Elem::S32, 2_147_483_648.0, false), 0x8000_0000);
        assert_eq!(encode(Elem::S32, 2_147_483_648.0, true), 0x7fff_ffff);
        assert_eq!(encode(Elem::S32, -3e9, true), 0x8000_0000);
    }

    #[test]
    fn tf32_inputs_drop_the_low_thirteen_mantissa_bits() {
        let x = f32::from_bits(0x3f80_1fff); // 1 + 8191 * 2^-23
        assert_eq!(decode(Elem::Tf32, u64::from(x.to_bits())), 1.0);
        assert_eq!(decode(Elem::S8, 0xff), -1.0);
        assert_eq!(decode(Elem::U8, 0xff), 255.0);
    }

    #[test]
    fn shapes_fit_the_gather_buffer() {
        for s in [
            Shape::M16n8k16,
            Shape::M16n8k8,
            Shape::M16n8k4,
            Shape::M16n8k32,
            Shape::M8n8k16,
            Shape::M8n8k4,
        ] {
            let (m, n, k) = s.mnk();
            assert!(m * k <= MAX_ELEMS && k * n <= MAX_ELEMS && m * n <= 16 * 8);
        }
    }
}
