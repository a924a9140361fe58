//! Device memory: real host allocations (256-byte aligned) whose addresses are the device
//! addresses, one table for the whole process, and the accounting behind cuMemGetInfo.
//!
//! Each allocation's bytes live in a reference-counted [`Block`]; a copy or kernel in flight holds
//! the blocks it uses, so freeing an allocation while work still touches it (a user bug) cannot
//! become a use-after-free in softcuda.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver;

/// Alignment of every allocation, as NVIDIA's cuMemAlloc guarantees.
pub(crate) const ALIGN: usize = 256;

/// What kind of memory an allocation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// cuMemAlloc / module globals: counted against device memory.
    Device,
    /// cuMemAllocAsync / cuMemAllocFromPoolAsync: a memory pool's allocation. Counted against
    /// device memory through its pool's reserve (see `pool`), not here; the pool's, not a
    /// context's, so a context's destruction leaves it.
    Pool,
    /// cuMemAllocHost / cuMemHostAlloc: page-locked host memory, visible to kernels (UVA).
    Host,
    /// cuMemAllocManaged: counted against device memory, usable from host and kernels.
    Managed,
    /// cuMemHostRegister: the caller's host memory, page-locked for a context. Not ours: it is
    /// never freed here, only forgotten when unregistered or when its context goes.
    Registered,
    /// A run of cuMemMap-ed, accessible virtual memory (see `vmm`): counted when its physical
    /// memory was created, never freed here.
    Mapped,
    /// A CUDA array's texels (see `array`): counted against device memory, freed only by
    /// cuArrayDestroy or its context's destruction, never by cuMemFree.
    Array,
}

/// The bytes of one allocation, freed when the last holder lets go (if they are ours: `layout`
/// is None for registered host memory, which stays its owner's, and for mapped virtual memory,
/// whose `owner` tells `vmm` when no kernel or copy holds the range any more).
pub(crate) struct Block {
    ptr: NonNull<u8>,
    layout: Option<Layout>,
    owner: Option<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: a Block owns its heap allocation outright; the raw pointer is only a handle to it, and
// concurrent access to the bytes is the CUDA program's to order (as on a GPU).
unsafe impl Send for Block {}
// SAFETY: as above; &Block exposes nothing but the address.
unsafe impl Sync for Block {}

impl Block {
    /// The byte `offset` bytes into the block (keeps the allocation's provenance).
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        self.ptr.as_ptr().wrapping_add(offset)
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // Dropped first and explicitly: a vmm owner signals that the range is no longer in use.
        drop(self.owner.take());
        if let Some(layout) = self.layout {
            // SAFETY: ptr was returned by alloc_zeroed with exactly this layout and is freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

struct Entry {
    len: u64,
    ctx_id: u64,
    kind: Kind,
    block: Arc<Block>,
}

static TABLE: RwLock<BTreeMap<u64, Entry>> = RwLock::new(BTreeMap::new());
static DEVICE_USED: AtomicU64 = AtomicU64::new(0);

fn read() -> RwLockReadGuard<'static, BTreeMap<u64, Entry>> {
    // Table updates are single insert/remove calls; a panic elsewhere cannot tear them.
    TABLE.read().unwrap_or_else(PoisonError::into_inner)
}

fn write() -> RwLockWriteGuard<'static, BTreeMap<u64, Entry>> {
    TABLE.write().unwrap_or_else(PoisonError::into_inner)
}

fn counts(kind: Kind) -> bool {
    matches!(kind, Kind::Device | Kind::Managed | Kind::Array)
}

/// Allocates `len` bytes (zeroed) for context `ctx_id`; returns the device address.
pub(crate) fn alloc(ctx_id: u64, len: u64, kind: Kind) -> CuResult<u64> {
    if len == 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let total = driver::total_memory();
    if counts(kind) {
        DEVICE_USED
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(len).filter(|&n| n <= total)
            })
            .map_err(|_| CUresult::CUDA_ERROR_OUT_OF_MEMORY)?;
    }
    let unreserve = || {
        if counts(kind) {
            DEVICE_USED.fetch_sub(len, Ordering::AcqRel);
        }
    };
    let Some(layout) = usize::try_from(len)
        .ok()
        .and_then(|n| Layout::from_size_align(n, ALIGN).ok())
    else {
        unreserve();
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    };
    // SAFETY: layout has a nonzero size (len > 0).
    let raw = unsafe { std::alloc::alloc_zeroed(layout) };
    let Some(ptr) = NonNull::new(raw) else {
        unreserve();
        return Err(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    };
    let addr = ptr.as_ptr() as u64;
    let block = Arc::new(Block {
        ptr,
        layout: Some(layout),
        owner: None,
    });
    write().insert(
        addr,
        Entry {
            len,
            ctx_id,
            kind,
            block,
        },
    );
    Ok(addr)
}

/// Frees the allocation that starts exactly at `addr` if it is of one of `kinds`; anything else
/// is `CUDA_ERROR_INVALID_VALUE`.
pub(crate) fn free(addr: u64, kinds: &[Kind]) -> CuResult<()> {
    let mut table = write();
    match table.get(&addr) {
        Some(e) if kinds.contains(&e.kind) => {}
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
    if let Some(e) = table.remove(&addr)
        && counts(e.kind)
    {
        DEVICE_USED.fetch_sub(e.len, Ordering::AcqRel);
    }
    Ok(())
}

/// cuMemHostRegister: records the caller's `[addr, addr + len)` as page-locked host memory of
/// context `ctx_id`. Overlapping a registered range or an allocation is
/// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`, as in NVIDIA's driver; pages that cannot be
/// pinned (`host_pages`: inaccessible, or read-only where `writable`) are
/// `CUDA_ERROR_INVALID_VALUE` (which code NVIDIA's driver gives for them was not checked).
pub(crate) fn register(ctx_id: u64, addr: u64, len: u64, writable: bool) -> CuResult<()> {
    let (Some(ptr), true) = (NonNull::new(addr as *mut u8), len > 0) else {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    };
    let end = addr
        .checked_add(len)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if !crate::host_pages::pinnable(addr, len, writable) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let mut table = write();
    let overlaps = table
        .range(..end)
        .next_back()
        .is_some_and(|(&base, e)| base + e.len > addr);
    if overlaps {
        return Err(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
    let block = Arc::new(Block {
        ptr,
        layout: None,
        owner: None,
    });
    table.insert(
        addr,
        Entry {
            len,
            ctx_id,
            kind: Kind::Registered,
            block,
        },
    );
    Ok(())
}

/// cuMemHostUnregister: forgets the registration starting exactly at `addr`.
pub(crate) fn unregister(addr: u64) -> CuResult<()> {
    let mut table = write();
    match table.get(&addr) {
        Some(e) if e.kind == Kind::Registered => {
            table.remove(&addr);
            Ok(())
        }
        _ => Err(CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED),
    }
}

/// Frees everything a destroyed context allocated (and forgets what it registered). Virtual
/// memory is not the context's: an H200 keeps reservations, mappings and physical allocations
/// through a primary-context reset (conformance `vmm::a_primary_context_reset_keeps_…`), so
/// their mapped runs stay. Pool memory is its pool's (`pool` frees it), so it stays too.
pub(crate) fn release_context(ctx_id: u64) {
    let mut table = write();
    let doomed: Vec<u64> = table
        .iter()
        .filter(|(_, e)| e.ctx_id == ctx_id && !matches!(e.kind, Kind::Mapped | Kind::Pool))
        .map(|(a, _)| *a)
        .collect();
    for addr in doomed {
        if let Some(e) = table.remove(&addr)
            && counts(e.kind)
        {
            DEVICE_USED.fetch_sub(e.len, Ordering::AcqRel);
        }
    }
}

/// Counts `len` bytes of device memory as used (cuMemCreate); `CUDA_ERROR_OUT_OF_MEMORY` when
/// the device would be over its size.
pub(crate) fn charge(len: u64) -> CuResult<()> {
    let total = driver::total_memory();
    DEVICE_USED
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(len).filter(|&n| n <= total)
        })
        .map(|_| ())
        .map_err(|_| CUresult::CUDA_ERROR_OUT_OF_MEMORY)
}

/// Gives back what [`charge`] counted.
pub(crate) fn uncharge(len: u64) {
    DEVICE_USED.fetch_sub(len, Ordering::AcqRel);
}

/// One accessible run of mapped virtual memory for [`replace_views`]: `[addr, addr + len)`,
/// whose bytes are at the same host address, and the token dropped when nothing uses it.
pub(crate) struct View {
    /// Start address (device and host).
    pub(crate) addr: u64,
    /// Length in bytes.
    pub(crate) len: u64,
    /// Dropped with the last holder of the run's block.
    pub(crate) owner: Box<dyn std::any::Any + Send + Sync>,
}

/// Replaces, in one step, every `Mapped` entry starting in `[start, end)` by `views` (runs of
/// context `ctx_id` inside that range), so no kernel snapshot sees a half-updated reservation.
pub(crate) fn replace_views(ctx_id: u64, start: u64, end: u64, views: Vec<View>) {
    let mut table = write();
    let old: Vec<u64> = table
        .range(start..end)
        .filter(|(_, e)| e.kind == Kind::Mapped)
        .map(|(a, _)| *a)
        .collect();
    for addr in old {
        table.remove(&addr);
    }
    for v in views {
        let Some(ptr) = NonNull::new(v.addr as *mut u8) else {
            continue;
        };
        let block = Arc::new(Block {
            ptr,
            layout: None,
            owner: Some(v.owner),
        });
        table.insert(
            v.addr,
            Entry {
                len: v.len,
                ctx_id,
                kind: Kind::Mapped,
                block,
            },
        );
    }
}

/// (free, total) device bytes.
pub(crate) fn info() -> (u64, u64) {
    let total = driver::total_memory();
    (
        total.saturating_sub(DEVICE_USED.load(Ordering::Acquire)),
        total,
    )
}

/// What a pointer lies in.
#[derive(Clone)]
pub(crate) struct Allocation {
    /// Start address.
    pub(crate) base: u64,
    /// Length in bytes.
    pub(crate) len: u64,
    /// Owning context's id.
    pub(crate) ctx_id: u64,
    /// Kind of memory.
    pub(crate) kind: Kind,
    block: Arc<Block>,
}

/// The allocation containing `addr`, if any.
pub(crate) fn find(addr: u64) -> Option<Allocation> {
    let table = read();
    let (&base, e) = table.range(..=addr).next_back()?;
    (addr < base + e.len).then(|| Allocation {
        base,
        len: e.len,
        ctx_id: e.ctx_id,
        kind: e.kind,
        block: Arc::clone(&e.block),
    })
}

/// A checked range of device-visible memory, holding its allocation alive.
pub(crate) struct Span {
    ptr: *mut u8,
    len: usize,
    _block: Arc<Block>,
}

// SAFETY: `ptr` points into the Block the Span holds alive; moving the Span to a stream worker
// moves the right to touch those bytes with it.
unsafe impl Send for Span {}

impl Span {
    /// The first byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// `[addr, addr + len)` when it lies wholly inside one live allocation; otherwise
/// `CUDA_ERROR_INVALID_VALUE` (the memcpy/memset error for a bad range).
pub(crate) fn span(addr: u64, len: u64) -> CuResult<Span> {
    let a = find(addr).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let end = addr
        .checked_add(len)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if end > a.base + a.len {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(Span {
        // Derived from the block's own pointer so the span keeps the allocation's provenance.
        ptr: a.block.at((addr - a.base) as usize),
        len: usize::try_from(len).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?,
        _block: a.block,
    })
}

/// The allocations a kernel in context `ctx_id` may touch — its own, plus page-locked (allocated
/// or registered) host memory, managed memory, pool memory and mapped virtual memory from any
/// context (those
/// are process-wide on NVIDIA: managed memory seen on the H200 in
/// scripts/probes/managed-probe.cu, virtual memory outliving its context in conformance) — as
/// sorted, non-overlapping `(start, end, block)`.
pub(crate) fn visible_to(ctx_ids: &[u64]) -> Vec<(u64, u64, Arc<Block>)> {
    read()
        .iter()
        .filter(|(_, e)| {
            ctx_ids.contains(&e.ctx_id)
                || matches!(
                    e.kind,
                    Kind::Host | Kind::Registered | Kind::Managed | Kind::Mapped | Kind::Pool
                )
        })
        .map(|(&a, e)| (a, a + e.len, Arc::clone(&e.block)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_aligned_zeroed_and_found_by_interior_pointer() {
        let a = alloc(u64::MAX, 1000, Kind::Device).unwrap();
        assert_eq!(a % ALIGN as u64, 0);
        let s = span(a + 10, 990).unwrap();
        // SAFETY: the span covers 990 live bytes.
        let bytes = unsafe { std::slice::from_raw_parts(s.ptr(), s.len()) };
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(find(a + 999).unwrap().base, a);
        assert!(span(a + 10, 991).is_err());
        free(a, &[Kind::Device]).unwrap();
        assert!(find(a).is_none());
    }

    #[test]
    fn free_of_interior_pointer_or_wrong_kind_is_invalid_value() {
        let a = alloc(u64::MAX - 1, 64, Kind::Host).unwrap();
        assert_eq!(
            free(a + 1, &[Kind::Host]),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        assert_eq!(
            free(a, &[Kind::Device]),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        free(a, &[Kind::Host]).unwrap();
    }
}
