//! The warp-level matrix instructions' executor: `mma` gathers every lane's fragments into
//! A, B and C (layouts in `ir::matrix`), computes D = A·B + C, and scatters D's fragments
//! back; `movmatrix` transposes an 8×8 b16 matrix across the warp; `ldmatrix` and `stmatrix`
//! move 8×8 b16 matrices between rows in memory (one address a lane) and fragments.
//!
//! Precision. f16, bf16 and tf32 products are exact in f64, and each dot product is summed in
//! f64 and rounded once to the result type (round to nearest even). Tensor cores round their
//! partial sums differently, so results can differ from an NVIDIA GPU's in the last bits;
//! integer forms are exact (wrapping, or clamped with `.satfinite`), and f64 is an FMA chain
//! in `k` order. Inputs are read from every lane, active or not: `mma.sync.aligned` requires
//! the whole warp, and what an absent lane contributes is undefined there too.

use super::super::access::{LaneFault, lanes, offset};
use super::super::float::{from_half, to_half};
use super::super::mem::Mem;
use super::super::warp::Warp;
use super::BlockMem;
use crate::ir::Src;
use crate::ir::matrix::{Elem, MatrixAccess, MmaOp, Part, per_lane, position};

/// Up to four 8×8 matrices of b16, row-major.
type Rows = [[[u16; 8]; 8]; 4];

/// Largest matrix of any shape ptxvm runs: A of `.m16n8k32`.
const MAX_ELEMS: usize = 16 * 32;

/// One element of a fragment register, as a number (integers exactly).
pub(super) fn decode(ty: Elem, raw: u64) -> f64 {
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
pub(super) fn encode(ty: Elem, x: f64, satfinite: bool) -> u64 {
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
        let mut out = [0u64; 32];
        for (lane, word) in out.iter_mut().enumerate() {
            let (row, col) = (lane >> 2, (lane & 3) * 2);
            for e in 0..2 {
                let (src, half) = holder(row, col + e, true);
                *word |= ((av[src] >> (16 * half)) & 0xffff) << (16 * e as u32);
            }
        }
        self.wr(d, &out, mask);
    }
}

/// Lane and half-word of a fragment holding element `(r, c)` of an 8×8 b16 matrix, which
/// `trans` reads as its transpose: lane `4r + c / 2` holds row `r`, columns `c & !1` and `+1`.
fn holder(r: usize, c: usize, trans: bool) -> (usize, u32) {
    let (r, c) = if trans { (c, r) } else { (r, c) };
    (4 * r + c / 2, (c % 2) as u32)
}

impl Warp {
    /// The rows `ldmatrix` reads: row `r` of matrix `j` at lane `8j + r`'s address, 16 bytes.
    /// Rows of lanes outside `mask` read as zero (the hardware leaves them undefined).
    fn matrix_rows(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &MatrixAccess,
        mask: u32,
    ) -> Result<Rows, LaneFault> {
        let mut rows = [[[0u16; 8]; 8]; 4];
        for l in lanes(mask).filter(|l| *l < 8 * usize::from(a.n)) {
            let loc = self
                .lane_loc(mem, bm, a.space, &a.addr, l, 16, false)
                .map_err(|e| (e, l))?;
            for (c, e) in rows[l / 8][l % 8].iter_mut().enumerate() {
                *e = mem.load(&offset(&loc, 2 * c as u64), 2) as u16;
            }
        }
        Ok(rows)
    }

    /// Executes `ldmatrix` for the lanes in `mask`.
    pub(super) fn ldmatrix(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &MatrixAccess,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let rows = self.matrix_rows(mem, bm, a, mask)?;
        for (j, m) in rows.iter().enumerate().take(usize::from(a.n)) {
            let mut out = [0u64; 32];
            for (l, w) in out.iter_mut().enumerate() {
                // Lane l holds (row l / 4, columns 2(l % 4) and +1) of what it reads.
                let (r, c) = (l / 4, (l % 4) * 2);
                let e = |k: usize| if a.trans { m[c + k][r] } else { m[r][c + k] };
                *w = u64::from(e(0)) | (u64::from(e(1)) << 16);
            }
            self.wr(a.d[j], &out, mask);
        }
        Ok(())
    }

    /// Executes `stmatrix` for the lanes in `mask`: lane `8j + r` stores row `r` of matrix `j`,
    /// gathered from the lanes whose fragments hold it.
    pub(super) fn stmatrix(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &MatrixAccess,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let mut vals = [[0u64; 32]; 4];
        for (v, s) in vals.iter_mut().zip(&a.s).take(usize::from(a.n)) {
            *v = self.rd(*s);
        }
        for l in lanes(mask).filter(|l| *l < 8 * usize::from(a.n)) {
            let (j, r) = (l / 8, l % 8);
            let loc = self
                .lane_loc(mem, bm, a.space, &a.addr, l, 16, true)
                .map_err(|e| (e, l))?;
            for c in 0..8 {
                let (lane, half) = holder(r, c, a.trans);
                let v = (vals[j][lane] >> (16 * half)) & 0xffff;
                mem.store(&offset(&loc, 2 * c as u64), 2, v);
            }
        }
        Ok(())
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
