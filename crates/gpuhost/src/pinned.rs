//! Page-locked host memory of our own: [`HostBuffer`], which users fill and read in place and
//! transfer with no staging copy, and the staging chunks of pageable transfers. Both are
//! [`Pinned`] regions — heap memory we allocate, registered with the context by
//! cuMemHostRegister — drawn from one pool per host, so repeated allocation costs neither an
//! allocation nor a registration (pinning pages is milliseconds for large regions). A host can
//! page-lock its transfers' staging up front ([`Host::reserve_staging`]): on NVIDIA, pinning
//! waits for the device, which a transfer must never do while a kernel waits for that transfer.
//!
//! Why our own memory, registered, rather than cuMemHostAlloc: a foreign reset that destroys the
//! context only drops the registration. The memory stays ours, so a copy in or out of it, or a
//! user's slice of it, never touches memory the driver freed; a [`HostBuffer`] even survives a
//! loss (its bytes stay readable) and is registered with the new context on its next transfer.
//!
//! Unregistering: cuMemHostUnregister waits until every kernel running on the device has ended
//! and holds every other thread's driver calls meanwhile (on the H200, driver 580:
//! bench/h200-runs/2026-12-02-s12/unload-stall/README.md). A region is unregistered only when
//! the pool trims it (it comes back to a full pool), and then on the host's release thread
//! (deferred.rs), never on the thread that dropped it: a request, a transfer or the completion
//! thread. Taking and returning pooled regions makes no driver call.
//!
//! Lifetime: the batch fencing a DMA holds an `Arc<Pinned>` until the DMA is done. A region whose
//! DMA's end was never observed (the enqueue or its fence failed, or it ended with the context
//! lost) is marked unknown and leaked, never reused or freed: softcuda's workers drain a dead
//! context's queue, and no one can tell when a driver is done with it.

use std::alloc::Layout;
use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::result;

/// Alignment of every region: whole pages, as cuMemHostRegister wants.
const PAGE: usize = 4096;
/// Bytes of regions a host keeps pooled, and how many, beside its staging reserve
/// ([`Host::reserve_staging`]); more are unregistered and freed.
const POOL_BYTES: usize = 256 << 20;
const POOL_ENTRIES: usize = 64;

/// The capacity a region of `len` bytes is allocated with: a power of two up to 1 MiB, whole
/// MiB above, so regions of similar sizes are interchangeable in the pool.
fn capacity_for(len: usize) -> Option<usize> {
    let len = len.max(PAGE);
    if len <= 1 << 20 {
        Some(len.next_power_of_two())
    } else {
        len.checked_next_multiple_of(1 << 20)
    }
}

fn layout(cap: usize) -> Option<Layout> {
    Layout::from_size_align(cap, PAGE).ok()
}

/// A region of our own heap memory, registered with one context generation (or not yet), from
/// its host's pool and returned to it on drop.
pub(crate) struct Pinned {
    host: Arc<Host>,
    ptr: *mut u8,
    cap: usize,
    /// The generation it is registered in; 0 while not registered.
    registered: Mutex<u64>,
    /// Set when a DMA on it may not have run or ended (see the module header): leaked on drop.
    unknown: AtomicBool,
    /// Times it was registered (its first, then once per context loss it outlived).
    registrations: AtomicUsize,
    /// Memory of someone else's ([`Host::lock_memory`](crate::Host::lock_memory)): what keeps
    /// it mapped, dropped once the region is unregistered. None for our own heap memory.
    owner: Option<Box<dyn Any + Send + Sync>>,
}

// SAFETY: the region is plain memory, our own heap memory or someone else's kept mapped by its
// `Send + Sync` owner; who may read or write it while a DMA runs is governed by the holders
// (transfers, batches, HostBuffer, LockedMemory), as documented there.
unsafe impl Send for Pinned {}
// SAFETY: as above; the only shared mutable state is behind a mutex and an atomic.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// A staging region of at least `len` bytes registered in `generation` (the caller entered
    /// the host at it): pooled — of any larger size when none fits closely, so transfers of
    /// every size are served by the staging reserve — or allocated zeroed and registered. A
    /// pooled one holds old bytes.
    pub(crate) fn take(host: &Arc<Host>, generation: u64, len: usize) -> Result<Self> {
        Self::take_or_fresh(host, generation, len, true).map(|(p, _)| p)
    }

    /// A pooled staging region of at least `len` bytes, if one is free (never page-locks).
    pub(crate) fn try_take(host: &Arc<Host>, generation: u64, len: usize) -> Option<Self> {
        let cap = capacity_for(len)?;
        let (ptr, cap) = host.pinned.take(generation, cap, true)?;
        Some(Self::of(host, ptr as *mut u8, cap, generation))
    }

    /// [`Pinned::take`], also saying whether the region is freshly allocated (zeroed);
    /// `any_larger` as in [`Pool::take`].
    fn take_or_fresh(
        host: &Arc<Host>,
        generation: u64,
        len: usize,
        any_larger: bool,
    ) -> Result<(Self, bool)> {
        let too_big = || Error::HostMemory {
            bytes: len,
            reason: "larger than the address space allows".into(),
        };
        let cap = capacity_for(len).ok_or_else(too_big)?;
        if let Some((ptr, cap)) = host.pinned.take(generation, cap, any_larger) {
            return Ok((Self::of(host, ptr as *mut u8, cap, generation), false));
        }
        let fresh = Self::unregistered(host, len)?;
        fresh.register_for(generation)?;
        Ok((fresh, true))
    }

    /// A zeroed region of at least `len` bytes, not registered yet.
    pub(crate) fn unregistered(host: &Arc<Host>, len: usize) -> Result<Self> {
        let failed = |reason: &str| Error::HostMemory {
            bytes: len,
            reason: reason.into(),
        };
        let cap =
            capacity_for(len).ok_or_else(|| failed("larger than the address space allows"))?;
        let layout = layout(cap).ok_or_else(|| failed("larger than the address space allows"))?;
        // SAFETY: a nonzero-size layout (cap >= PAGE).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(failed("the allocator refused"));
        }
        Ok(Self::of(host, ptr, cap, 0))
    }

    fn of(host: &Arc<Host>, ptr: *mut u8, cap: usize, generation: u64) -> Self {
        Self {
            host: host.clone(),
            ptr,
            cap,
            registered: Mutex::new(generation),
            unknown: AtomicBool::new(false),
            registrations: AtomicUsize::new(0),
            owner: None,
        }
    }

    /// Someone else's `len` bytes at `ptr`, not registered yet, kept mapped by `owner`.
    ///
    /// # Safety
    /// As [`Host::lock_memory`](crate::Host::lock_memory): page-aligned, mapped, readable and
    /// writable, and kept so, with the same pages, until `owner` drops.
    pub(crate) unsafe fn foreign(
        host: &Arc<Host>,
        ptr: *mut u8,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Self {
        let mut region = Self::of(host, ptr, len, 0);
        region.owner = Some(owner);
        region
    }

    /// Registers the region with the context of `generation` (the caller entered the host at
    /// it) unless it already is. A registration of an older generation died with its context.
    pub(crate) fn register_for(&self, generation: u64) -> Result<()> {
        let mut g = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        if *g == generation {
            return Ok(());
        }
        // SAFETY: `ptr` is `cap` bytes of our own memory, page-aligned, alive until this value
        // drops, which unregisters it first (or finds its context dead); it is not registered
        // in the current context (its registration, if any, was of a dead one).
        let r = unsafe { result::mem::host_register(self.ptr.cast(), self.cap) };
        self.host.check_at(r, generation)?;
        let counters = &self.host.counters;
        crate::stats::Counters::inc(match self.owner {
            Some(_) => &counters.locked_registrations,
            None => &counters.pinned_registrations,
        });
        self.registrations.fetch_add(1, Ordering::Relaxed);
        *g = generation;
        Ok(())
    }

    /// Times it was registered with a context (see `registrations`).
    pub(crate) fn registrations(&self) -> usize {
        self.registrations.load(Ordering::Relaxed)
    }

    /// The host whose context it is registered with.
    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The start of the region.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Bytes in the region.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Marks the region as possibly still in use by the driver: it will be leaked on drop.
    pub(crate) fn mark_unknown(&self) {
        self.unknown.store(true, Ordering::Relaxed);
    }

    /// True once marked unknown.
    pub(crate) fn is_unknown(&self) -> bool {
        self.unknown.load(Ordering::Relaxed)
    }

    /// The first `len` bytes, to read when no DMA writes them.
    pub(crate) fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: `ptr` is `cap` bytes of live, initialised (zeroed at allocation) heap memory
        // owned by this value; len is clamped to cap; the caller reads only when no DMA writes.
        unsafe { std::slice::from_raw_parts(self.ptr, len.min(self.cap)) }
    }

    /// The first `len` bytes, to fill when no DMA reads or writes them.
    pub(crate) fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: as `bytes`; `&mut self` is the only handle.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.cap)) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if *self.unknown.get_mut() {
            // A DMA on it may still run: leaked (see the module header), an owner's memory too.
            std::mem::forget(self.owner.take());
            return;
        }
        let generation = *self.registered.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(owner) = self.owner.take() {
            // Someone else's memory is never pooled: unregistered (which waits for running
            // kernels) on the release thread, and only then may its owner unmap it.
            if generation != 0 && generation == self.host.generation() {
                let (host, ptr) = (Arc::clone(&self.host), self.ptr as usize);
                self.host.defer(Box::new(move || {
                    unregister(&host, generation, ptr as *mut u8);
                    drop(owner);
                }));
            }
            return;
        }
        if generation != 0 {
            match self
                .host
                .pinned
                .give(&self.host, generation, self.ptr, self.cap)
            {
                Returned::Pooled => return,
                Returned::Dead => {}
                Returned::Spare => {
                    // The pool trims it: unregistered and freed on the release thread.
                    let (host, ptr, cap) = (Arc::clone(&self.host), self.ptr as usize, self.cap);
                    self.host.defer(Box::new(move || {
                        unregister_and_free(&host, generation, ptr, cap)
                    }));
                    return;
                }
            }
        }
        // SAFETY: allocated by `unregistered` with this capacity's layout, no longer registered
        // (never, or with a dead context), freed once.
        unsafe { free_region(self.ptr, self.cap) };
    }
}

/// Unregisters a region the pool did not keep, then frees it (on the host's release thread).
fn unregister_and_free(host: &Host, generation: u64, ptr: usize, cap: usize) {
    let ptr = ptr as *mut u8;
    unregister(host, generation, ptr);
    // SAFETY: allocated by `Pinned::unregistered` with this capacity's layout, no longer
    // registered (unregistered above, or with a dead context), freed once: its `Pinned` was
    // dropped without freeing it.
    unsafe { free_region(ptr, cap) };
}

/// Unregisters a region registered in `generation`, unless that context died (taking the
/// registration with it). Waits for running kernels: on the release thread only.
fn unregister(host: &Host, generation: u64, ptr: *mut u8) {
    if host.enter_for(generation).is_ok() {
        // SAFETY: registered by register_for in this (current) context; no DMA uses it (its last
        // holder dropped it, after its fence resolved) and nothing else holds it.
        let r = unsafe { result::mem::host_unregister(ptr.cast()) };
        if let Err(e) = host.check(r) {
            host.drop_error("unregistering page-locked memory", &e);
        }
    }
}

/// Frees a region's memory.
///
/// # Safety
/// `ptr` and `cap` come from one [`Pinned`] that no DMA uses, that is not registered with a live
/// context, and that nothing else holds.
unsafe fn free_region(ptr: *mut u8, cap: usize) {
    if let Some(layout) = layout(cap) {
        // SAFETY: allocated with this layout (see `Pinned::unregistered`), freed once.
        unsafe { std::alloc::dealloc(ptr, layout) };
    }
}

/// What became of a region handed back to its host's pool.
pub(crate) enum Returned {
    /// Pooled for the next taker.
    Pooled,
    /// The pool is full: the region is to be unregistered and freed.
    Spare,
    /// Registered with a context that died (the registration went with it): to be freed.
    Dead,
}

/// A host's pool of idle registered regions, by generation and capacity.
#[derive(Default)]
pub(crate) struct Pool {
    entries: Mutex<Vec<Entry>>,
    /// Concurrent transfers the staging reserve is for (see [`Host::reserve_staging`]).
    reserved_transfers: AtomicUsize,
    /// Regions and bytes of the reserve, kept beside POOL_ENTRIES and POOL_BYTES.
    reserved_entries: AtomicUsize,
    reserved_bytes: AtomicUsize,
}

struct Entry {
    generation: u64,
    ptr: usize,
    cap: usize,
}

impl Pool {
    /// The smallest pooled region of `generation` holding `cap` bytes, at most twice that — or,
    /// with `any_larger` (staging, which holds a region only for one chunk's DMA), the smallest
    /// larger one when none is that close. Regions of a dead generation met on the way are
    /// freed.
    fn take(&self, generation: u64, cap: usize, any_larger: bool) -> Option<(usize, usize)> {
        let mut p = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        p.retain(|e| {
            if e.generation >= generation {
                return true;
            }
            // SAFETY: a pooled region of a dead generation: held by nobody, no DMA touches it.
            unsafe { free_region(e.ptr as *mut u8, e.cap) };
            false
        });
        let best = p
            .iter()
            .enumerate()
            .filter(|(_, e)| e.generation == generation && e.cap >= cap)
            .filter(|(_, e)| any_larger || e.cap <= 2 * cap)
            .min_by_key(|(_, e)| e.cap)
            .map(|(i, _)| i)?;
        let e = p.swap_remove(best);
        Some((e.ptr, e.cap))
    }

    /// Pools a region of `generation` unless the pool is full or the generation is dead.
    fn give(&self, host: &Host, generation: u64, ptr: *mut u8, cap: usize) -> Returned {
        let mut p = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if generation != host.generation() {
            return Returned::Dead;
        }
        let bytes: usize = p.iter().map(|e| e.cap).sum();
        let entries = POOL_ENTRIES + self.reserved_entries.load(Ordering::Relaxed);
        let most = POOL_BYTES + self.reserved_bytes.load(Ordering::Relaxed);
        if p.len() >= entries || bytes + cap > most {
            return Returned::Spare;
        }
        p.push(Entry {
            generation,
            ptr: ptr as usize,
            cap,
        });
        Returned::Pooled
    }

    /// Frees every pooled region: the caller (recovery) saw their context die, taking their
    /// registrations with it. Touches no driver state.
    pub(crate) fn free_dead(&self) {
        let stale = std::mem::take(&mut *self.entries.lock().unwrap_or_else(|p| p.into_inner()));
        for e in stale {
            // SAFETY: pooled regions of the dead context: held by nobody, no DMA touches them.
            unsafe { free_region(e.ptr as *mut u8, e.cap) };
        }
    }
}

/// Page-locked host memory that a stream transfers to and from a device with no staging copy
/// ([`Stream::upload_from`](crate::Stream::upload_from),
/// [`Stream::download_into`](crate::Stream::download_into)); fill and read it in place. Drawn
/// from the host's pool (returned on drop), zeroed when handed out.
///
/// It is our own memory: a context loss leaves its bytes readable, and its next transfer
/// registers it with the new context.
pub struct HostBuffer {
    host: Arc<Host>,
    /// The region; None while a download writes it (the download holds it, and puts it back or
    /// a fresh one when it ends) — and for good if that download's future was leaked
    /// (`mem::forget`): the buffer is then empty, never memory a DMA may still be writing.
    mem: Option<Arc<Pinned>>,
    len: usize,
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("device", &self.host.ordinal())
            .field("len", &self.len())
            .finish()
    }
}

impl Host {
    /// `len` bytes of zeroed page-locked host memory for transfers with no staging copy.
    pub fn host_buffer(self: &Arc<Self>, len: usize) -> Result<HostBuffer> {
        let (mut mem, zeroed) = self.fresh(|| {
            let generation = self.enter()?;
            Pinned::take_or_fresh(self, generation, len, false)
        })?;
        if !zeroed {
            // A pooled region holds an earlier user's bytes.
            mem.bytes_mut(len).fill(0);
        }
        Ok(HostBuffer {
            host: self.clone(),
            mem: Some(Arc::new(mem)),
            len,
        })
    }
}

impl Host {
    /// [`Host::host_buffer`] from the pool only (the region may be a larger staging chunk):
    /// None when no pooled region of `len` bytes or more is free, or the context is lost. It
    /// never page-locks memory, which on NVIDIA waits for the whole device
    /// ([`Host::set_staging_growth`]).
    pub fn try_host_buffer(self: &Arc<Self>, len: usize) -> Option<HostBuffer> {
        let generation = self.enter().ok()?;
        let mut mem = Pinned::try_take(self, generation, len)?;
        // A pooled region holds an earlier user's bytes.
        mem.bytes_mut(len).fill(0);
        Some(HostBuffer {
            host: self.clone(),
            mem: Some(Arc::new(mem)),
            len,
        })
    }

    /// Whether uploads may page-lock more staging than is pooled (default true). With false, an
    /// upload that finds no free staging copies that chunk through the driver's own pageable
    /// path instead (slower, but it waits only for the stream's earlier work): memory locked
    /// beyond the pool is unregistered when the pool trims it, and on NVIDIA cuMemHostUnregister
    /// waits for every running kernel while holding other threads' driver calls (registering
    /// does not wait: conformance stalls.rs), so an upload that a running kernel waits for — a
    /// guest's kernel spinning until the guest's own `buffer.write` lands — could wait for that
    /// kernel. Embedders running untrusted guests turn growth off after
    /// [`Host::reserve_staging`].
    pub fn set_staging_growth(&self, allowed: bool) {
        self.staging_growth
            .store(allowed, std::sync::atomic::Ordering::Relaxed);
    }

    /// Page-locks, up front, the staging that `transfers` pageable transfers running at once
    /// (or as many as an earlier call asked for, if more)
    /// need ([`Stream::upload`](crate::Stream::upload), [`Stream::download`](crate::Stream::download)
    /// with this host's [`TransferConfig`](crate::TransferConfig): `chunks_in_flight + 1` chunks
    /// each), and keeps it pooled, so those transfers never allocate nor register page-locked
    /// memory. That matters beyond speed: a pool grown past its reserve is trimmed later, and
    /// on NVIDIA unregistering waits inside the driver for every running kernel, holding other
    /// threads' driver calls, so a transfer racing a trim while a kernel runs (say one that spins
    /// until this very transfer's data arrives) would wait for that kernel. More
    /// transfers at once than reserved still work, allocating what they lack.
    ///
    /// Kept when the transfer config changes (the reserve is re-made for the new chunk size).
    /// A context loss frees it with the context's registrations: call again after one.
    pub fn reserve_staging(self: &Arc<Self>, transfers: usize) -> Result<()> {
        let cfg = self.transfer_config();
        let bytes = capacity_for(cfg.chunk_bytes).ok_or(Error::HostMemory {
            bytes: cfg.chunk_bytes,
            reason: "larger than the address space allows".into(),
        })?;
        let p = &self.pinned;
        let transfers = p
            .reserved_transfers
            .fetch_max(transfers, Ordering::Relaxed)
            .max(transfers);
        let want = transfers.saturating_mul(cfg.chunks_in_flight + 1);
        p.reserved_entries.store(want, Ordering::Relaxed);
        p.reserved_bytes
            .store(want.saturating_mul(bytes), Ordering::Relaxed);
        self.fresh(|| {
            let generation = self.enter()?;
            // Take every region the reserve needs at once (pooled ones of the size first), so
            // none is counted twice; all go back to the pool when `held` drops.
            let mut held = Vec::with_capacity(want);
            while held.len() < want {
                match p.take(generation, bytes, false) {
                    Some((ptr, cap)) => {
                        held.push(Pinned::of(self, ptr as *mut u8, cap, generation))
                    }
                    None => break,
                }
            }
            while held.len() < want {
                let fresh = Pinned::unregistered(self, bytes)?;
                fresh.register_for(generation)?;
                held.push(fresh);
            }
            Ok(())
        })
    }

    /// Re-makes the staging reserve, if there is one, for a new transfer config.
    pub(crate) fn re_reserve_staging(self: &Arc<Self>) -> Result<()> {
        match self.pinned.reserved_transfers.load(Ordering::Relaxed) {
            0 => Ok(()),
            n => self.reserve_staging(n),
        }
    }
}

impl HostBuffer {
    /// Size in bytes (0 after a download into it was leaked, see `mem`).
    pub fn len(&self) -> usize {
        if self.mem.is_some() { self.len } else { 0 }
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device whose host it belongs to.
    pub fn device(&self) -> usize {
        self.host.ordinal()
    }

    /// The host it belongs to.
    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The region, if the buffer has one (see `mem`).
    pub(crate) fn region(&self) -> Option<&Arc<Pinned>> {
        self.mem.as_ref()
    }

    /// The bytes, to read in place.
    pub fn as_slice(&self) -> &[u8] {
        // No DMA writes them while this borrow lives: a download takes the region out of the
        // buffer while it runs, and one that does not end cleanly puts fresh memory back.
        self.mem.as_ref().map_or(&[], |m| m.bytes(self.len))
    }

    /// The bytes, to fill in place.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let Some(m) = &self.mem else { return &mut [] };
        let (ptr, len) = (m.ptr(), self.len.min(m.cap()));
        // SAFETY: `len` bytes of the live region this buffer holds; `&mut self` excludes every
        // other borrow through it, and no DMA writes it (see `as_slice`). A cancelled upload's
        // DMA may still read it: the device then reads unspecified bytes for a transfer that
        // never completed, which touches no memory of ours.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// Checks that `range` lies inside the buffer.
    pub(crate) fn check_range(&self, range: &Range<usize>) -> Result<()> {
        check_host_range(range, self.len())
    }

    /// Before a download: moves the buffer off a region an earlier upload may still read (a
    /// batch holds it, or its DMA's end was never observed), copying its bytes over — an
    /// upload's DMA only reads — so the download's outcome is its own. Then takes the region
    /// out for the download (see `mem`); None when the buffer has none.
    pub(crate) fn lend(&mut self) -> Option<Arc<Pinned>> {
        let region = self.mem.take()?;
        if !in_use(&region) {
            return Some(region);
        }
        let mut fresh = fresh_or_abort(&self.host, self.len);
        fresh
            .bytes_mut(self.len)
            .copy_from_slice(region.bytes(self.len));
        Some(Arc::new(fresh))
    }

    /// After a download: puts its region back — or, when the download did not end cleanly (its
    /// DMA may still write the region), fresh zeroed memory, registered on its next transfer;
    /// the old region stays with whoever holds it (a batch, or a leak).
    pub(crate) fn give_back(&mut self, region: Arc<Pinned>) {
        self.mem = Some(if in_use(&region) {
            Arc::new(fresh_or_abort(&self.host, self.len))
        } else {
            region
        });
    }
}

/// Checks that `range` is ascending and lies inside host memory of `size` bytes (a host buffer,
/// or locked memory).
pub(crate) fn check_host_range(range: &Range<usize>, size: usize) -> Result<()> {
    if range.start > range.end || range.end > size {
        return Err(Error::HostRange {
            start: range.start,
            end: range.end,
            size,
        });
    }
    Ok(())
}

/// True while a region may be in a DMA's hands: a batch still holds it (a transfer was dropped
/// midway), or a DMA's end was never observed (marked unknown).
fn in_use(region: &Arc<Pinned>) -> bool {
    Arc::strong_count(region) > 1 || region.is_unknown()
}

/// A zeroed unregistered region of `len` bytes. The same size was allocated before, so failing
/// is the allocator out of memory: abort as Rust's collections do, rather than hand a borrow
/// memory a DMA may write.
fn fresh_or_abort(host: &Arc<Host>, len: usize) -> Pinned {
    match Pinned::unregistered(host, len) {
        Ok(fresh) => fresh,
        Err(e) => {
            host.drop_error("moving a host buffer off a DMA", &e);
            let l = capacity_for(len)
                .and_then(layout)
                .unwrap_or_else(Layout::new::<[u8; PAGE]>);
            std::alloc::handle_alloc_error(l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_page_multiples_powers_of_two_then_whole_mebibytes() {
        assert_eq!(capacity_for(0), Some(PAGE));
        assert_eq!(capacity_for(PAGE + 1), Some(2 * PAGE));
        assert_eq!(capacity_for(1 << 20), Some(1 << 20));
        assert_eq!(capacity_for((1 << 20) + 1), Some(2 << 20));
        assert_eq!(capacity_for((5 << 20) + 7), Some(6 << 20));
        assert_eq!(capacity_for(usize::MAX), None);
    }
}
