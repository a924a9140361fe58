//! `wmma`'s executor: loads and stores move each lane's fragment slots between registers and
//! the matrix in memory (row- or column-major, a leading dimension of `stride` elements, each
//! lane through its own address and stride), and the multiply gathers A, B and C from every
//! lane's fragments, computes D = A·B + C in f64 (f16, bf16, tf32 and integer products are
//! exact, and integer sums too; one rounding) and writes every slot of D. The slots' layout is
//! `ir::matrix::wmma_position`'s.

use super::super::access::{LaneFault, lanes};
use super::super::mem::Mem;
use super::super::warp::Warp;
use super::BlockMem;
use super::matrix::{decode, encode};
use crate::ir::Src;
use crate::ir::matrix::{Elem, Part, WmmaAccess, WmmaMma, WmmaShape, wmma_position};

/// Slots a register of `ty` holds, the bits of each, and a mask of them.
fn slots(ty: Elem) -> (usize, u32, u64) {
    let bits = ty.bits();
    (ty.per_reg(), bits, u64::MAX >> (64 - bits))
}

/// Registers of a fragment the decoder accepted (it refuses the others).
fn regs(shape: WmmaShape, part: Part, ty: Elem) -> usize {
    shape.regs(part, ty).unwrap_or(0)
}

/// The address of element `(r, c)` of `a`'s matrix for a lane whose pointer is `base` and
/// whose leading dimension is `stride` elements.
fn element_addr(a: &WmmaAccess, base: u64, stride: u64, (r, c): (usize, usize)) -> u64 {
    let (major, minor) = if a.row_major { (r, c) } else { (c, r) };
    let elems = (major as u64)
        .wrapping_mul(stride)
        .wrapping_add(minor as u64);
    base.wrapping_add(elems.wrapping_mul(u64::from(a.ty.bits() / 8)))
}

impl Warp {
    /// Each lane's pointer and leading dimension (the matrix's own when none is given).
    fn wmma_bases(&self, a: &WmmaAccess) -> [(u64, u64); 32] {
        let (rows, cols) = a.shape.dims(a.part);
        let lead = if a.row_major { cols } else { rows } as u64;
        let strides = a.stride.map(|s| self.rd(s));
        std::array::from_fn(|l| {
            let stride = strides.map_or(lead, |v| v[l] & 0xffff_ffff);
            (self.addr_of(&a.addr, l), stride)
        })
    }

    /// `wmma.load` for the lanes in `mask`.
    pub(super) fn wmma_load(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &WmmaAccess,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let (per, bits, _) = slots(a.ty);
        let regs = regs(a.shape, a.part, a.ty);
        let bases = self.wmma_bases(a);
        let mut out = [[0u64; 32]; 8];
        for l in lanes(mask) {
            let lm = self.lane_mem(bm, l);
            let (base, stride) = bases[l];
            for e in 0..regs * per {
                let at = element_addr(a, base, stride, wmma_position(a.shape.dims(a.part), l, e));
                let size = u64::from(bits / 8);
                let loc = mem
                    .locate(a.space, at, size, &lm, false)
                    .map_err(|f| (f, l))?;
                out[e / per][l] |= mem.load(&loc, size) << (bits * (e % per) as u32);
            }
        }
        for (d, v) in a.d.iter().zip(&out).take(regs) {
            self.wr(*d, v, mask);
        }
        Ok(())
    }

    /// `wmma.store` for the lanes in `mask` (each element once: repeated slots hold copies).
    pub(super) fn wmma_store(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &WmmaAccess,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let (per, bits, ones) = slots(a.ty);
        let dims = a.shape.dims(a.part);
        let mut vals = [[0u64; 32]; 8];
        for (v, s) in vals.iter_mut().zip(&a.s).take(regs(a.shape, a.part, a.ty)) {
            *v = self.rd(*s);
        }
        let bases = self.wmma_bases(a);
        for l in lanes(mask) {
            let lm = self.lane_mem(bm, l);
            let (base, stride) = bases[l];
            for e in 0..dims.0 * dims.1 / 32 {
                let at = element_addr(a, base, stride, wmma_position(dims, l, e));
                let size = u64::from(bits / 8);
                let loc = mem
                    .locate(a.space, at, size, &lm, true)
                    .map_err(|f| (f, l))?;
                mem.store(
                    &loc,
                    size,
                    (vals[e / per][l] >> (bits * (e % per) as u32)) & ones,
                );
            }
        }
        Ok(())
    }

    /// One matrix gathered from every lane's fragment in `regs` (row-major, `dims`).
    fn wmma_gather(&self, regs: &[Src], ty: Elem, dims: (usize, usize)) -> Vec<f64> {
        let (per, bits, ones) = slots(ty);
        let mut vals = [[0u64; 32]; 8];
        for (v, s) in vals.iter_mut().zip(regs) {
            *v = self.rd(*s);
        }
        // Each element once: slots past the first `unique` repeat them.
        let unique = dims.0 * dims.1 / 32;
        let mut m = vec![0f64; dims.0 * dims.1];
        for (j, reg) in vals.iter().enumerate().take(unique.div_ceil(per)) {
            for (l, word) in reg.iter().enumerate() {
                for h in (0..per).filter(|h| j * per + h < unique) {
                    let (r, c) = wmma_position(dims, l, j * per + h);
                    m[r * dims.1 + c] = decode(ty, (word >> (bits * h as u32)) & ones);
                }
            }
        }
        m
    }

    /// `wmma.mma` for the lanes in `mask`.
    pub(super) fn wmma_mma(&mut self, op: &WmmaMma, mask: u32) {
        let s = op.shape;
        let (da, db, dc) = (s.dims(Part::A), s.dims(Part::B), s.dims(Part::C));
        let a = self.wmma_gather(&op.a[..regs(s, Part::A, op.a_ty)], op.a_ty, da);
        let b = self.wmma_gather(&op.b[..regs(s, Part::B, op.b_ty)], op.b_ty, db);
        let c = self.wmma_gather(&op.c[..regs(s, Part::C, op.c_ty)], op.c_ty, dc);
        let k = da.1;
        let d: Vec<f64> = (0..dc.0 * dc.1)
            .map(|i| {
                let (r, col) = (i / dc.1, i % dc.1);
                c[i] + (0..k)
                    .map(|x| a[r * k + x] * b[x * dc.1 + col])
                    .sum::<f64>()
            })
            .collect();
        let (per, bits, _) = slots(op.d_ty);
        let n = regs(s, Part::C, op.d_ty);
        let mut out = [[0u64; 32]; 8];
        for (j, reg) in out.iter_mut().enumerate().take(n) {
            for (l, word) in reg.iter_mut().enumerate() {
                for h in 0..per {
                    let (r, col) = wmma_position(dc, l, j * per + h);
                    let x = encode(op.d_ty, d[r * dc.1 + col], op.satfinite);
                    *word |= x << (bits * h as u32);
                }
            }
        }
        for (d, v) in op.d.iter().zip(&out).take(n) {
            self.wr(*d, v, mask);
        }
    }
}
