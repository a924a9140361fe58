//! The memory family's executor (`isa::Family::Memory`): loads, stores and atomics for the
//! lanes of the mask (the address arithmetic and checks are `vm::access`'s and `vm::mem`'s).

use super::super::access::{LaneFault, lanes, offset};
use super::super::mem::{Mem, atomic};
use super::super::warp::Warp;
use super::BlockMem;
use crate::api::FaultKind;
use crate::ir::{CpFill, MemoryOp};

impl Warp {
    /// Executes a memory op for the lanes in `mask`; a fault names the lane.
    #[inline(always)]
    pub(super) fn memory(
        &mut self,
        op: &MemoryOp,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        mask: u32,
    ) -> Result<(), LaneFault> {
        match op {
            MemoryOp::Ld {
                space,
                ty,
                n,
                ds,
                addr,
            } => {
                self.load(mem, bm, (*space, *ty, *n, addr), ds, mask)?;
            }
            MemoryOp::St {
                space,
                ty,
                n,
                srcs,
                addr,
            } => {
                self.store(mem, bm, (*space, *ty, *n, addr), srcs, mask)?;
            }
            MemoryOp::Atom {
                space,
                op,
                ty,
                d,
                addr,
                b,
                c,
            } => {
                let (bv, cv) = (self.rd(*b), self.rd(*c));
                let es = u64::from(ty.bytes());
                let mut out = [0u64; 32];
                for l in lanes(mask) {
                    let loc = self
                        .lane_loc(mem, bm, *space, addr, l, es, true)
                        .map_err(|e| (e, l))?;
                    out[l] = atomic(&loc, *op, *ty, bv[l], cv[l]);
                }
                self.wr(*d, &out, mask);
            }
            MemoryOp::CpFill(c) => self.cp_fill(mem, bm, c, mask)?,
            MemoryOp::Ldmatrix(a) => self.ldmatrix(mem, bm, a, mask)?,
            MemoryOp::Stmatrix(a) => self.stmatrix(mem, bm, a, mask)?,
            MemoryOp::WmmaLoad(a) => self.wmma_load(mem, bm, a, mask)?,
            MemoryOp::WmmaStore(a) => self.wmma_store(mem, bm, a, mask)?,
            MemoryOp::WmmaMma(op) => self.wmma_mma(op, mask),
            MemoryOp::Mbarrier(op) => self.mbarrier(mem, bm, op, mask)?,
        }
        Ok(())
    }
}

impl Warp {
    /// `cp.async` with a source size: each lane reads `min(src_size, size)` bytes (none when
    /// `ignore` is set, and then its source address is not looked at) and writes `size` bytes,
    /// the rest zeros. The source must be aligned to `size`, as the hardware requires.
    fn cp_fill(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        c: &CpFill,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let (nv, iv) = (self.rd(c.src_size), self.rd(c.ignore));
        let size = u64::from(c.size);
        for l in lanes(mask) {
            let n = if iv[l] & 1 != 0 {
                0
            } else {
                (nv[l] & 0xffff_ffff).min(size)
            };
            let mut bytes = [0u8; 16];
            if n > 0 {
                let at = self.addr_of(&c.src, l);
                if !at.is_multiple_of(size) {
                    return Err((FaultKind::MisalignedAddress { addr: at }, l));
                }
                let lm = self.lane_mem(bm, l);
                for (k, b) in bytes.iter_mut().enumerate().take(n as usize) {
                    let loc = mem
                        .locate(c.ssp, at.wrapping_add(k as u64), 1, &lm, false)
                        .map_err(|e| (e, l))?;
                    *b = mem.load(&loc, 1) as u8;
                }
            }
            let d = self
                .lane_loc(mem, bm, c.dsp, &c.dst, l, size, true)
                .map_err(|e| (e, l))?;
            for (k, b) in bytes.iter().enumerate().take(c.size as usize) {
                mem.store(&offset(&d, k as u64), 1, u64::from(*b));
            }
        }
        Ok(())
    }
}
