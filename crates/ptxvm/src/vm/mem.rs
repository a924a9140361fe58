//! Memory access for the VM: state-space resolution (generic windows, shared, local, params,
//! global through `Memory::translate` with a small translation cache), bounds and alignment
//! checks, and the loads, stores and atomics themselves.
//!
//! Global memory is shared with other worker threads running other blocks, so every access to
//! it goes through `std::sync::atomic` types (relaxed loads/stores compile to plain moves);
//! that keeps racy-but-legal GPU programs free of Rust data races.

use std::sync::atomic::{
    AtomicI32, AtomicI64, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed,
    Ordering::SeqCst,
};

use crate::api::{FaultKind, Memory};
use crate::devio::DeviceOutput;
use crate::ir::{AtomOp, KPARAM_BASE, LOCAL_WINDOW, SHARED_WINDOW, Space, Ty, WINDOW_SIZE};

/// Where an access lands.
pub(crate) enum Loc {
    /// Writable memory, aligned to the access size.
    Ptr(*mut u8),
    /// Offset into the read-only kernel parameter buffer.
    Param(usize),
}

/// Size of the windows probed with `translate` when the driver cannot report allocations.
const PROBE: u64 = 4096;

/// Per-worker view of memory with a translation cache.
pub(crate) struct Mem<'a> {
    pub mem: &'a dyn Memory,
    pub params: &'a [u8],
    /// Where device `printf` records go.
    pub out: &'a DeviceOutput,
    /// Known-valid ranges `(start, end, host address of start)`.
    cache: [(u64, u64, usize); 4],
    victim: usize,
}

/// The per-thread memory a lane can reach besides global memory.
pub(crate) struct LaneMem {
    pub shared: *mut u8,
    pub shared_len: u64,
    pub local: *mut u8,
    pub local_len: u64,
}

impl<'a> Mem<'a> {
    pub(crate) fn new(mem: &'a dyn Memory, params: &'a [u8], out: &'a DeviceOutput) -> Self {
        Mem {
            mem,
            params,
            out,
            cache: [(1, 0, 0); 4],
            victim: 0,
        }
    }

    /// Host pointer for global `[addr, addr + len)`. Every pointer it returns (and the cached
    /// ranges it derives them from) came from `Memory::translate` or `Memory::allocation`, so by
    /// the `Memory` trait's `# Safety` contract it is valid for reads and writes of `len` bytes,
    /// live until the launch returns and aliased by no Rust reference; it may be unaligned.
    pub(crate) fn global(&mut self, addr: u64, len: u64) -> Result<*mut u8, FaultKind> {
        let end = addr.checked_add(len).ok_or(FaultKind::IllegalAddress {
            addr,
            len: len as u32,
        })?;
        for &(s, e, p) in &self.cache {
            if addr >= s && end <= e {
                return Ok((p + (addr - s) as usize) as *mut u8);
            }
        }
        let fill = if let Some((base, size, p)) = self.mem.allocation(addr) {
            Some((base, base.saturating_add(size), p as usize))
        } else {
            let page = addr & !(PROBE - 1);
            self.mem
                .translate(page, PROBE)
                .map(|p| (page, page.saturating_add(PROBE), p as usize))
        };
        if let Some((s, e, p)) = fill
            && addr >= s
            && end <= e
        {
            self.cache[self.victim] = (s, e, p);
            self.victim = (self.victim + 1) % self.cache.len();
            return Ok((p + (addr - s) as usize) as *mut u8);
        }
        self.mem
            .translate(addr, len)
            .ok_or(FaultKind::IllegalAddress {
                addr,
                len: len as u32,
            })
    }

    /// Global `[addr, addr + len)` (`len` a power of two) as an aligned location: texture and
    /// surface reads and writes, whose addresses the driver's objects describe.
    pub(crate) fn global_loc(&mut self, addr: u64, len: u64) -> Result<Loc, FaultKind> {
        if addr & (len - 1) != 0 {
            return Err(FaultKind::MisalignedAddress { addr });
        }
        let p = self.global(addr, len)?;
        if (p as u64) & (len - 1) != 0 {
            return Err(FaultKind::MisalignedAddress { addr });
        }
        Ok(Loc::Ptr(p))
    }

    /// Resolves an access of `len` bytes (a power of two, the alignment required).
    pub(crate) fn locate(
        &mut self,
        space: Space,
        addr: u64,
        len: u64,
        lane: &LaneMem,
        write: bool,
    ) -> Result<Loc, FaultKind> {
        if addr & (len - 1) != 0 {
            return Err(FaultKind::MisalignedAddress { addr });
        }
        let bad = FaultKind::IllegalAddress {
            addr,
            len: len as u32,
        };
        let within = |off: u64, size: u64| off.checked_add(len).is_some_and(|e| e <= size);
        let space = match space {
            Space::Generic if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.locate(Space::Shared, addr - SHARED_WINDOW, len, lane, write);
            }
            Space::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_SIZE).contains(&addr) => {
                return self.locate(Space::Local, addr - LOCAL_WINDOW, len, lane, write);
            }
            Space::Generic if (KPARAM_BASE..KPARAM_BASE + WINDOW_SIZE).contains(&addr) => {
                return self.locate(Space::Param, addr, len, lane, write);
            }
            s => s,
        };
        match space {
            Space::Shared if within(addr, lane.shared_len) => {
                // SAFETY: addr + len <= shared_len, the size of the block's shared buffer.
                Ok(Loc::Ptr(unsafe { lane.shared.add(addr as usize) }))
            }
            Space::Local if within(addr, lane.local_len) => {
                // SAFETY: addr + len <= local_len, the size of this lane's local area.
                Ok(Loc::Ptr(unsafe { lane.local.add(addr as usize) }))
            }
            Space::Param if addr >= KPARAM_BASE => {
                let off = addr - KPARAM_BASE;
                if write || !within(off, self.params.len() as u64) {
                    return Err(bad);
                }
                Ok(Loc::Param(off as usize))
            }
            Space::Param => self.locate(Space::Local, addr, len, lane, write),
            Space::Global | Space::Generic => {
                let p = self.global(addr, len)?;
                // Atomic access needs the host pointer aligned too; a `Memory` that maps device
                // addresses to differently aligned host memory is reported, never risked.
                if (p as u64) & (len - 1) != 0 {
                    return Err(FaultKind::MisalignedAddress { addr });
                }
                Ok(Loc::Ptr(p))
            }
            _ => Err(bad),
        }
    }

    /// Loads `len` bytes (1, 2, 4, 8) as a little-endian integer.
    pub(crate) fn load(&self, loc: &Loc, len: u64) -> u64 {
        match *loc {
            Loc::Param(off) => {
                let mut b = [0u8; 8];
                b[..len as usize].copy_from_slice(&self.params[off..off + len as usize]);
                u64::from_le_bytes(b)
            }
            // SAFETY: `locate` returned a pointer to `len` valid, writable bytes aligned to
            // `len` (shared/local: bounds-checked into the VM's own buffers; global: `global`,
            // whose pointers the `Memory` contract makes valid, live and unaliased by Rust
            // references for the launch, with alignment checked in `locate`); all concurrent
            // accesses to device memory go through atomics.
            Loc::Ptr(p) => unsafe {
                match len {
                    1 => u64::from(AtomicU8::from_ptr(p).load(Relaxed)),
                    2 => u64::from(AtomicU16::from_ptr(p.cast()).load(Relaxed)),
                    4 => u64::from(AtomicU32::from_ptr(p.cast()).load(Relaxed)),
                    _ => AtomicU64::from_ptr(p.cast()).load(Relaxed),
                }
            },
        }
    }

    /// Stores the low `len` bytes of `v`.
    pub(crate) fn store(&self, loc: &Loc, len: u64, v: u64) {
        if let Loc::Ptr(p) = *loc {
            // SAFETY: as in `load`; `locate` refuses writes to the parameter buffer.
            unsafe {
                match len {
                    1 => AtomicU8::from_ptr(p).store(v as u8, Relaxed),
                    2 => AtomicU16::from_ptr(p.cast()).store(v as u16, Relaxed),
                    4 => AtomicU32::from_ptr(p.cast()).store(v as u32, Relaxed),
                    _ => AtomicU64::from_ptr(p.cast()).store(v, Relaxed),
                }
            }
        }
    }
}

/// Performs an atomic read-modify-write; returns the old value.
pub(crate) fn atomic(loc: &Loc, op: AtomOp, ty: Ty, b: u64, c: u64) -> u64 {
    let Loc::Ptr(p) = *loc else { return 0 };
    if ty.bits() == 32 {
        // SAFETY: `locate` returned 4 valid, writable bytes aligned to 4, unaliased by Rust
        // references (the `Memory` contract, for global memory).
        let a = unsafe { AtomicU32::from_ptr(p.cast()) };
        // SAFETY: same memory, same alignment; i32 and u32 atomics have the same layout.
        let s = unsafe { AtomicI32::from_ptr(p.cast()) };
        let (b32, c32) = (b as u32, c as u32);
        let upd = |f: &dyn Fn(u32) -> u32| match a.fetch_update(SeqCst, SeqCst, |x| Some(f(x))) {
            Ok(x) | Err(x) => x,
        };
        let old = match (op, ty) {
            (AtomOp::Add, Ty::F32) => upd(&|x| (f32::from_bits(x) + f32::from_bits(b32)).to_bits()),
            (AtomOp::Add, _) => a.fetch_add(b32, SeqCst),
            (AtomOp::Min, Ty::S32) => s.fetch_min(b32 as i32, SeqCst) as u32,
            (AtomOp::Max, Ty::S32) => s.fetch_max(b32 as i32, SeqCst) as u32,
            (AtomOp::Min, _) => a.fetch_min(b32, SeqCst),
            (AtomOp::Max, _) => a.fetch_max(b32, SeqCst),
            (AtomOp::Inc, _) => upd(&|x| if x >= b32 { 0 } else { x + 1 }),
            (AtomOp::Dec, _) => upd(&|x| if x == 0 || x > b32 { b32 } else { x - 1 }),
            (AtomOp::And, _) => a.fetch_and(b32, SeqCst),
            (AtomOp::Or, _) => a.fetch_or(b32, SeqCst),
            (AtomOp::Xor, _) => a.fetch_xor(b32, SeqCst),
            (AtomOp::Exch, _) => a.swap(b32, SeqCst),
            (AtomOp::Cas, _) => match a.compare_exchange(b32, c32, SeqCst, SeqCst) {
                Ok(x) | Err(x) => x,
            },
        };
        return u64::from(old);
    }
    // SAFETY: `locate` returned 8 valid, writable bytes aligned to 8, unaliased by Rust
    // references (the `Memory` contract, for global memory).
    let a = unsafe { AtomicU64::from_ptr(p.cast()) };
    // SAFETY: same memory, same alignment; i64 and u64 atomics have the same layout.
    let s = unsafe { AtomicI64::from_ptr(p.cast()) };
    let upd = |f: &dyn Fn(u64) -> u64| match a.fetch_update(SeqCst, SeqCst, |x| Some(f(x))) {
        Ok(x) | Err(x) => x,
    };
    match (op, ty) {
        (AtomOp::Add, Ty::F64) => upd(&|x| (f64::from_bits(x) + f64::from_bits(b)).to_bits()),
        (AtomOp::Add, _) => a.fetch_add(b, SeqCst),
        (AtomOp::Min, Ty::S64) => s.fetch_min(b as i64, SeqCst) as u64,
        (AtomOp::Max, Ty::S64) => s.fetch_max(b as i64, SeqCst) as u64,
        (AtomOp::Min, _) => a.fetch_min(b, SeqCst),
        (AtomOp::Max, _) => a.fetch_max(b, SeqCst),
        (AtomOp::Inc, _) => upd(&|x| if x >= b { 0 } else { x + 1 }),
        (AtomOp::Dec, _) => upd(&|x| if x == 0 || x > b { b } else { x - 1 }),
        (AtomOp::And, _) => a.fetch_and(b, SeqCst),
        (AtomOp::Or, _) => a.fetch_or(b, SeqCst),
        (AtomOp::Xor, _) => a.fetch_xor(b, SeqCst),
        (AtomOp::Exch, _) => a.swap(b, SeqCst),
        (AtomOp::Cas, _) => match a.compare_exchange(b, c, SeqCst, SeqCst) {
            Ok(x) | Err(x) => x,
        },
    }
}
