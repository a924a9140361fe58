//! `wmma`'s executor: loads and stores move each lane's fragment slots between registers and
//! the matrix in memory (row- or column-major, a leading dimension of `stride` elements, each
//! lane through its own address and stride), and the multiply gathers A, B and C from every
//! lane's fragments, computes D = A·B + C in f64 (f16 products are exact; one rounding) and
//! writes every slot of D. The slots' layout is `ir::matrix::wmma_position`'s.

use super::super::access::{LaneFault, lanes};
use super::super::float::{from_half, to_half};
use super::super::mem::Mem;
use super::super::warp::Warp;
use super::BlockMem;
use crate::ir::matrix::{Elem, Part, WmmaAccess, WmmaMma, wmma_position, wmma_regs};
use crate::ir::{Reg, Src};

/// Bits of one slot of a fragment register of type `ty`, and the slot's value.
fn unpack(ty: Elem, word: u64, e: usize) -> f64 {
    match ty {
        Elem::F16 => f64::from(from_half((word >> (16 * (e % 2))) as u16, false)),
        _ => f64::from(f32::from_bits(word as u32)),
    }
}

fn pack(ty: Elem, x: f64) -> u64 {
    match ty {
        Elem::F16 => u64::from(to_half(x, false)),
        _ => u64::from((x as f32).to_bits()),
    }
}

impl Warp {
    /// Lane `l`'s element `(r, c)` of `a`'s matrix: its address, by the lane's own base and
    /// stride (the matrix's leading dimension by default).
    fn wmma_addr(&self, a: &WmmaAccess, l: usize, (r, c): (usize, usize)) -> u64 {
        let (rows, cols) = a.shape.dims(a.part);
        let lead = if a.row_major { cols } else { rows };
        let stride = a
            .stride
            .map_or(lead as u64, |s| self.rd(s)[l] & 0xffff_ffff);
        let (major, minor) = if a.row_major { (r, c) } else { (c, r) };
        let elems = (major as u64)
            .wrapping_mul(stride)
            .wrapping_add(minor as u64);
        let size = if a.ty == Elem::F16 { 2 } else { 4 };
        self.addr_of(&a.addr, l)
            .wrapping_add(elems.wrapping_mul(size))
    }

    /// `wmma.load` for the lanes in `mask`.
    pub(super) fn wmma_load(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        a: &WmmaAccess,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let (per, size) = if a.ty == Elem::F16 { (2, 2) } else { (1, 4) };
        let regs = wmma_regs(a.part, a.ty);
        let mut out = [[0u64; 32]; 8];
        for l in lanes(mask) {
            let lm = self.lane_mem(bm, l);
            for e in 0..regs * per {
                let at = self.wmma_addr(a, l, wmma_position(a.shape.dims(a.part), l, e));
                let loc = mem
                    .locate(a.space, at, size, &lm, false)
                    .map_err(|f| (f, l))?;
                out[e / per][l] |= mem.load(&loc, size) << (16 * (e % per));
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
        let (per, size) = if a.ty == Elem::F16 { (2, 2) } else { (1, 4) };
        let dims = a.shape.dims(a.part);
        let vals: Vec<[u64; 32]> =
            a.s.iter()
                .take(wmma_regs(a.part, a.ty))
                .map(|s| self.rd(*s))
                .collect();
        for l in lanes(mask) {
            let lm = self.lane_mem(bm, l);
            for e in 0..dims.0 * dims.1 / 32 {
                let at = self.wmma_addr(a, l, wmma_position(dims, l, e));
                let loc = mem
                    .locate(a.space, at, size, &lm, true)
                    .map_err(|f| (f, l))?;
                let v = (vals[e / per][l] >> (16 * (e % per)))
                    & if per == 2 { 0xffff } else { 0xffff_ffff };
                mem.store(&loc, size, v);
            }
        }
        Ok(())
    }

    /// One matrix gathered from every lane's fragment in `regs` (row-major, `dims`).
    fn wmma_gather(&self, regs: &[Src], ty: Elem, dims: (usize, usize)) -> Vec<f64> {
        let per = if ty == Elem::F16 { 2 } else { 1 };
        let vals: Vec<[u64; 32]> = regs.iter().map(|s| self.rd(*s)).collect();
        let mut m = vec![0f64; dims.0 * dims.1];
        for (l, _) in vals[0].iter().enumerate() {
            for e in 0..dims.0 * dims.1 / 32 {
                let (r, c) = wmma_position(dims, l, e);
                m[r * dims.1 + c] = unpack(ty, vals[e / per][l], e);
            }
        }
        m
    }

    /// `wmma.mma` for the lanes in `mask`.
    pub(super) fn wmma_mma(&mut self, op: &WmmaMma, mask: u32) {
        let s = op.shape;
        let (da, db, dc) = (s.dims(Part::A), s.dims(Part::B), s.dims(Part::C));
        let a = self.wmma_gather(&op.a[..wmma_regs(Part::A, Elem::F16)], Elem::F16, da);
        let b = self.wmma_gather(&op.b[..wmma_regs(Part::B, Elem::F16)], Elem::F16, db);
        let c = self.wmma_gather(&op.c[..wmma_regs(Part::C, op.c_ty)], op.c_ty, dc);
        let k = da.1;
        let d: Vec<f64> = (0..dc.0 * dc.1)
            .map(|i| {
                let (r, col) = (i / dc.1, i % dc.1);
                c[i] + (0..k)
                    .map(|x| a[r * k + x] * b[x * dc.1 + col])
                    .sum::<f64>()
            })
            .collect();
        let per = if op.d_ty == Elem::F16 { 2 } else { 1 };
        let regs = wmma_regs(Part::C, op.d_ty);
        let mut out = [[0u64; 32]; 8];
        for (j, reg) in out.iter_mut().enumerate().take(regs) {
            for (l, word) in reg.iter_mut().enumerate() {
                for h in 0..per {
                    let (r, col) = wmma_position(dc, l, j * per + h);
                    *word |= pack(op.d_ty, d[r * dc.1 + col]) << (16 * h);
                }
            }
        }
        let dregs: Vec<Reg> = op.d.iter().take(regs).copied().collect();
        for (d, v) in dregs.iter().zip(&out) {
            self.wr(*d, v, mask);
        }
    }
}
