//! Lane memory access for the warp: address computation, one-span fast paths for loads and
//! stores whose lanes all hit one allocation (or shared memory), per-lane fallbacks that pinpoint
//! the faulting lane, and call-argument copies inside local memory.

// Lane loops index several per-lane arrays at once; iterator chains would obscure that.
#![allow(clippy::needless_range_loop)]

use super::exec::BlockMem;
use super::mem::{LaneMem, Loc, Mem};
use super::warp::Warp;
use crate::api::FaultKind;
use crate::ir::{Addr, LOCAL_WINDOW, SHARED_WINDOW, Space, Src, Ty, norm};

/// A memory instruction's shape: space, element type, vector width, address.
pub(crate) type Access<'a> = (Space, Ty, u8, &'a Addr);

/// A fault and the lane that caused it.
pub(crate) type LaneFault = (FaultKind, usize);

/// Iterates the set bits of a lane mask.
#[inline(always)]
pub(crate) fn lanes(mask: u32) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

impl Warp {
    pub(crate) fn addr_of(&self, a: &Addr, l: usize) -> u64 {
        let base = match a.base {
            Some(r) if a.wide => self.regs[r as usize][l],
            Some(r) => self.regs[r as usize][l] & 0xffff_ffff,
            None => 0,
        };
        base.wrapping_add(a.off as u64)
    }

    /// Resolves lane `l`'s access of `len` bytes at `addr`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lane_loc(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        space: Space,
        addr: &Addr,
        l: usize,
        len: u64,
        write: bool,
    ) -> Result<Loc, FaultKind> {
        let at = self.addr_of(addr, l);
        let lm = self.lane_mem(bm, l);
        mem.locate(space, at, len, &lm, write)
    }

    pub(crate) fn lane_mem(&mut self, bm: &BlockMem, l: usize) -> LaneMem {
        let stride = self.local_stride;
        // SAFETY: `local` holds 32 * stride bytes, so lane l's area starts in bounds.
        let local = unsafe {
            self.local
                .as_mut_ptr()
                .cast::<u8>()
                .add(l * stride as usize)
        };
        LaneMem {
            shared: bm.shared,
            shared_len: bm.shared_len,
            local,
            local_len: stride,
        }
    }

    /// Copies `len` bytes inside one lane's local memory (call argument passing).
    pub(crate) fn local_copy(
        &mut self,
        l: usize,
        src: u32,
        dst: u32,
        len: u32,
    ) -> Result<(), FaultKind> {
        let stride = self.local_stride as usize;
        let bytes: &mut [u8] = bytemuck_u8(&mut self.local);
        let lane = &mut bytes[l * stride..(l + 1) * stride];
        let (s, d, n) = (src as usize, dst as usize, len as usize);
        if s + n > stride || d + n > stride {
            return Err(FaultKind::IllegalAddress {
                addr: LOCAL_WINDOW + src as u64,
                len,
            });
        }
        lane.copy_within(s..s + n, d);
        Ok(())
    }

    /// Host pointers for every lane in `mask` when all `len`-byte accesses are aligned and fall
    /// in one region that needs a single check; `None` sends the caller to the per-lane path.
    fn span(
        &self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        space: Space,
        addr: &Addr,
        mask: u32,
        len: u64,
    ) -> Option<[*mut u8; 32]> {
        // Every lane's address in one branch-free pass, then bounds over the active ones.
        let mut at = [addr.off as u64; 32];
        if let Some(r) = addr.base {
            let base = &self.regs[r as usize];
            let m = if addr.wide { u64::MAX } else { 0xffff_ffff };
            for l in 0..32 {
                at[l] = (base[l] & m).wrapping_add(addr.off as u64);
            }
        }
        let (mut lo, mut hi, mut or) = (u64::MAX, 0u64, 0u64);
        for l in lanes(mask) {
            let a = at[l];
            lo = lo.min(a);
            hi = hi.max(a);
            or |= a;
        }
        if or & (len - 1) != 0 || mask == 0 {
            return None;
        }
        let size = (hi - lo).checked_add(len)?;
        let shared_end = |base: u64| {
            lo >= base
                && (hi - base)
                    .checked_add(len)
                    .is_some_and(|e| e <= bm.shared_len)
        };
        let base: *mut u8 = match space {
            // `global` covers all of [lo, lo + size) under the `Memory` contract.
            Space::Global => mem.global(lo, size).ok()?,
            Space::Generic if hi < SHARED_WINDOW => mem.global(lo, size).ok()?,
            // SAFETY: shared_end checked [lo, hi + len) against the shared buffer's size.
            Space::Shared if shared_end(0) => unsafe { bm.shared.add(lo as usize) },
            Space::Generic if shared_end(SHARED_WINDOW) => {
                // SAFETY: as above, relative to the shared window.
                unsafe { bm.shared.add((lo - SHARED_WINDOW) as usize) }
            }
            _ => return None,
        };
        if (base as u64) & (len - 1) != lo & (len - 1) {
            return None;
        }
        let mut out = [std::ptr::null_mut(); 32];
        for l in lanes(mask) {
            // SAFETY: lo <= at[l] and at[l] + len <= lo + size, all inside the region `base`
            // covers (the shared buffer, or global memory valid for `size` bytes by the `Memory`
            // contract).
            out[l] = unsafe { base.add((at[l] - lo) as usize) };
        }
        Some(out)
    }

    /// `ld`: every lane in `mask` loads `n` elements into `ds`.
    pub(crate) fn load(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        (space, ty, n, addr): Access<'_>,
        ds: &[u32; 4],
        mask: u32,
    ) -> Result<(), LaneFault> {
        let es = u64::from(ty.bytes());
        let total = es * u64::from(n);
        if let Some(ptrs) = self.span(mem, bm, space, addr, mask, total) {
            for k in 0..n as usize {
                let reg = &mut self.regs[ds[k] as usize];
                for l in lanes(mask) {
                    // SAFETY: `span` validated each lane's whole vector access.
                    let p = unsafe { ptrs[l].add(k * es as usize) };
                    reg[l] = norm(ty, mem.load(&Loc::Ptr(p), es));
                }
            }
            return Ok(());
        }
        for l in lanes(mask) {
            let loc = self
                .lane_loc(mem, bm, space, addr, l, total, false)
                .map_err(|e| (e, l))?;
            for k in 0..n as usize {
                let v = mem.load(&offset(&loc, k as u64 * es), es);
                self.regs[ds[k] as usize][l] = norm(ty, v);
            }
        }
        Ok(())
    }

    /// `st`: every lane in `mask` stores `n` elements from `srcs`.
    pub(crate) fn store(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        (space, ty, n, addr): Access<'_>,
        srcs: &[Src; 4],
        mask: u32,
    ) -> Result<(), LaneFault> {
        let es = u64::from(ty.bytes());
        let total = es * u64::from(n);
        let val = |w: &Warp, k: usize, l: usize| match srcs[k] {
            Src::Reg(r) => w.regs[r as usize][l],
            Src::Imm(v) => v,
        };
        if let Some(ptrs) = self.span(mem, bm, space, addr, mask, total) {
            for k in 0..n as usize {
                for l in lanes(mask) {
                    // SAFETY: `span` validated each lane's whole vector access.
                    let p = unsafe { ptrs[l].add(k * es as usize) };
                    mem.store(&Loc::Ptr(p), es, val(self, k, l));
                }
            }
            return Ok(());
        }
        for l in lanes(mask) {
            let loc = self
                .lane_loc(mem, bm, space, addr, l, total, true)
                .map_err(|e| (e, l))?;
            for k in 0..n as usize {
                mem.store(&offset(&loc, k as u64 * es), es, val(self, k, l));
            }
        }
        Ok(())
    }
}

/// Shifts a resolved location by `by` bytes (vector elements).
pub(crate) fn offset(loc: &Loc, by: u64) -> Loc {
    match *loc {
        // SAFETY: `locate` validated the whole vector access, so element offsets stay inside.
        Loc::Ptr(p) => Loc::Ptr(unsafe { p.add(by as usize) }),
        Loc::Param(o) => Loc::Param(o + by as usize),
    }
}

/// Views the local-memory words as bytes.
fn bytemuck_u8(v: &mut [u64]) -> &mut [u8] {
    let len = v.len() * 8;
    // SAFETY: u8 has no alignment or validity requirements; the length covers the same bytes
    // and the borrow of `v` is carried over to the result.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}
