//! The memory family's executor (`isa::Family::Memory`): loads, stores and atomics for the
//! lanes of the mask (the address arithmetic and checks are `vm::access`'s and `vm::mem`'s).

use super::super::access::{LaneFault, lanes};
use super::super::mem::{Mem, atomic};
use super::super::warp::Warp;
use super::BlockMem;
use crate::ir::MemoryOp;

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
            MemoryOp::Ldmatrix(a) => self.ldmatrix(mem, bm, a, mask)?,
            MemoryOp::Stmatrix(a) => self.stmatrix(mem, bm, a, mask)?,
        }
        Ok(())
    }
}
