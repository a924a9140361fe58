//! Guest linear memory that gpuhost can page-lock ([`GuestMemoryCreator`]), so that a guest's
//! large `buffer.write` is one DMA straight out of its memory ([`gpuhost::Stream::upload_locked`])
//! instead of a copy through staging: issue #12's guest write, 0.44× raw pinned through staging
//! on the H100 (bench/RESULTS.md, session 44).
//!
//! Why memories of our own: page-locked memory must keep the same pages until it is
//! unregistered, and wasmtime's own memories promise no such thing — its pooling allocator
//! discards a slot's pages between instances, and a memory is unmapped when its Store drops,
//! whatever DMA may still read it. Here every memory is one fixed reservation (it never moves),
//! and its pages are locked in pieces ([`lock`]) whose handles own the mapping: it is unmapped
//! only after its last piece is unregistered, which gpuhost does once no DMA reads it.
//!
//! When a write goes direct ([`direct_parts`]): at least [`DIRECT_MIN`] bytes, into granules of
//! the memory that an earlier large write touched (a guest writing a region once never pays for
//! locking it: milliseconds for large ranges, where staging costs about a millisecond per 40
//! MiB), within the guest's [`Limits::max_locked_memory_bytes`](crate::Limits) across all its
//! memories ([`LockedTally`]: a component may have many), the pieces a reused memory comes with
//! included. Anything else is staged as before. Locking failing (the driver refusing more
//! page-locked memory) is not an error: that memory's writes are staged for the rest of its
//! guest's run (the next guest of a pooled memory tries again).
//!
//! Reuse: unregistering waits for every kernel running on the device and holds other threads'
//! driver calls meanwhile (bench/h200-runs/2026-12-02-s12/unload-stall/) — with a guest's kernel
//! waiting for that guest's next write, a deadlock until the kernel's time limit. So a memory with
//! locked pieces is never unregistered while its creator lives: when its guest ends, its unlocked
//! pages are dropped and it is pooled, pieces and all, for the next guest's memory (every pooled
//! memory is idle, so the pool holds no more memories than ever ran at once); one whose pages
//! cannot be dropped, or whose size cannot be set for its next guest (the kernel refusing `madvise`
//! or `mprotect`), is kept apart, never reused, until the creator goes. The pinned bytes are
//! bounded by the creator's budget ([`DEFAULT_LOCK_BUDGET`]): past it, writes are staged. A memory
//! made for a guest being instantiated ([`made_for`]) is a pooled one only if its pieces fit what
//! the guest's limit leaves and are locked for the guest's device (one creator may serve guests of
//! several devices, and a piece is registered with one device's context). Before reuse every byte
//! the old guest could reach is zero: its unlocked pages were dropped (`madvise(MADV_DONTNEED)`),
//! and its locked pieces are overwritten with zeros — dropping a locked page would leave the DMA
//! reading the old page, and the next guest's writes would upload the old guest's bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use gpuhost::{Host, LockedMemory};
use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

mod tally;
pub(crate) use tally::{LockedTally, SharedTally, made_for};

/// Writes smaller than this are staged: a pooled staging chunk is as fast for them, and
/// locking never pays off.
pub const DIRECT_MIN: usize = 1 << 20;
/// Memories are locked in pieces aligned to granules of this size (a piece may be shorter where
/// the memory ended when it was locked).
const GRANULE: usize = 16 << 20;
/// Locked pieces per memory at most: each DMA looks through them.
const MAX_PIECES: usize = 64;
/// Bytes a [`GuestMemoryCreator`] may lock across its memories, pooled ones included.
pub const DEFAULT_LOCK_BUDGET: usize = 1 << 30;
/// The least a memory reserves, unless its maximum is less: the most a 32-bit memory can grow
/// to (wasmtime may reserve more, or less).
const DEFAULT_RESERVATION: usize = 4 << 30;

/// A [`wasmtime::MemoryCreator`] whose memories gpuhost-wasm can page-lock for guests' writes
/// (see the module header). [`Runtime`](crate::Runtime) installs one; an embedder with an
/// engine of its own can too (`Config::with_host_memory`). It has no effect under wasmtime's
/// pooling allocator, which makes memories itself: their writes are staged. Turn
/// `Config::memory_init_cow` off beside it: wasmtime 48 builds copy-on-write images only on its
/// own memories, and reaches an `unreachable!` on one of ours.
pub struct GuestMemoryCreator {
    pool: Arc<Pool>,
}

impl Default for GuestMemoryCreator {
    fn default() -> Self {
        Self::with_lock_budget(DEFAULT_LOCK_BUDGET)
    }
}

impl GuestMemoryCreator {
    /// A creator whose memories may lock `bytes` in all (0: every write is staged).
    pub fn with_lock_budget(bytes: usize) -> Self {
        Self {
            pool: Arc::new(Pool {
                idle: Mutex::default(),
                spent: Mutex::default(),
                budget: bytes,
                locked: AtomicUsize::new(0),
            }),
        }
    }
}

impl std::fmt::Debug for GuestMemoryCreator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestMemoryCreator")
            .field("pooled", &self.pool.lock().len())
            .field("spent", &self.pool.spent().len())
            .field("locked", &self.pool.locked.load(Ordering::Relaxed))
            .field("budget", &self.pool.budget)
            .finish()
    }
}

/// Process-wide counts of [`GuestMemoryCreator`] memories, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuestMemoryStats {
    /// Memories made, fresh or reused.
    pub memories: u64,
    /// Of those, memories reused from a pool (their locked pieces kept).
    pub reused: u64,
    /// Writes uploaded straight from guest memory.
    pub direct_writes: u64,
    /// Bytes of guest memory page-locked now, pooled memories' included.
    pub locked_bytes: u64,
}

static MEMORIES: AtomicU64 = AtomicU64::new(0);
static REUSED: AtomicU64 = AtomicU64::new(0);
static DIRECT_WRITES: AtomicU64 = AtomicU64::new(0);
static LOCKED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The counts so far.
pub fn guest_memory_stats() -> GuestMemoryStats {
    GuestMemoryStats {
        memories: MEMORIES.load(Ordering::Relaxed),
        reused: REUSED.load(Ordering::Relaxed),
        direct_writes: DIRECT_WRITES.load(Ordering::Relaxed),
        locked_bytes: LOCKED_BYTES.load(Ordering::Relaxed),
    }
}

/// The system's page size.
fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(4096)
}

/// A reservation of address space, unmapped on drop: by its memory's slot when nothing was
/// locked, else by the release thread after its last piece is unregistered.
struct Mapping {
    base: *mut u8,
    /// Bytes reserved, the guard included.
    len: usize,
}

// SAFETY: the mapping is address space owned by this value; who reads or writes the memory in it
// is governed by wasmtime (the guest's Store) and by the DMAs of locked pieces, as the module
// header documents.
unsafe impl Send for Mapping {}
// SAFETY: as above; the value itself is immutable.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of fresh address space, inaccessible.
    fn reserve(len: usize) -> Result<Self, String> {
        // SAFETY: a fresh private anonymous mapping; no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "cannot reserve {len} bytes of address space for a guest memory: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self {
            base: base.cast(),
            len,
        })
    }

    /// Sets `range` (inside the mapping) readable and writable, or inaccessible, in whole
    /// pages: every page it touches, or only those wholly past its start (the page holding the
    /// byte before it stays as it is). With custom page sizes a memory's size is any number of
    /// bytes.
    fn protect(&self, range: Range<usize>, access: bool) -> std::io::Result<()> {
        let page = page();
        let (start, prot) = if access {
            (
                range.start / page * page,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        } else {
            (range.start.next_multiple_of(page), libc::PROT_NONE)
        };
        // The mapping's length is a whole number of pages: `end` stays inside it.
        let end = range.end.next_multiple_of(page);
        if start >= end {
            return Ok(());
        }
        // SAFETY: `start..end` lies inside this mapping (callers keep `range` inside it, and its
        // length is whole pages), which we own.
        let r = unsafe { libc::mprotect(self.base.add(start).cast(), end - start, prot) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped by `reserve` with this length, unmapped once; no piece of it is locked
        // (every piece holds the mapping) and no guest uses it (its slot is gone).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One guest memory: its mapping, how much of it is accessible, and its locked pieces.
struct Slot {
    mapping: Arc<Mapping>,
    /// Its creator's pool, whose budget its pieces count against.
    pool: Weak<Pool>,
    /// Bytes the memory may grow to (the guard excluded).
    capacity: usize,
    guard: usize,
    accessible: AtomicUsize,
    locks: Mutex<Locks>,
}

#[derive(Default)]
struct Locks {
    /// Disjoint, sorted by start; offsets from the memory's base.
    pieces: Vec<Piece>,
    /// Bytes across `pieces`.
    bytes: usize,
    /// Granules a large write of the current guest touched.
    seen: BTreeSet<usize>,
    /// Locking, or a write straight from a locked piece, failed once: this memory's writes
    /// are staged for the rest of its guest's run (a reset clears it: see `Slot::reset`).
    refused: bool,
}

struct Piece {
    at: Range<usize>,
    locked: LockedMemory,
}

/// Base address → slot, to find the memory a guest's bytes lie in.
static SLOTS: Mutex<BTreeMap<usize, Weak<Slot>>> = Mutex::new(BTreeMap::new());

fn slots() -> MutexGuard<'static, BTreeMap<usize, Weak<Slot>>> {
    SLOTS.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slot {
    fn base(&self) -> usize {
        self.mapping.base as usize
    }

    fn locks(&self) -> MutexGuard<'_, Locks> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether it has at most `room` bytes locked, for `device` if given, and no DMA still reads
    /// one of its pieces.
    fn idle_within(&self, room: usize, device: Option<usize>) -> bool {
        let locks = self.locks();
        let for_device =
            device.is_none_or(|d| locks.pieces.first().is_none_or(|p| p.locked.device() == d));
        locks.bytes <= room && for_device && !locks.pieces.iter().any(|p| p.locked.in_use())
    }

    /// When its guest ends: drops the pages outside its locked pieces (they read zero from now
    /// on and hold no memory while pooled). A DMA may still read a piece: they are untouched.
    fn retire(&self) -> std::io::Result<()> {
        injected(Step::Retire)?;
        let old = self.accessible.load(Ordering::Relaxed);
        let locks = self.locks();
        let mut at = 0;
        for p in &locks.pieces {
            discard(&self.mapping, at..p.at.start.min(old))?;
            at = p.at.end;
        }
        discard(&self.mapping, at.min(old)..old)
    }

    /// Readies a retired memory for a new guest: its locked pieces zeroed (see the module
    /// header), `minimum` bytes accessible.
    fn reset(&self, minimum: usize) -> std::io::Result<()> {
        let old = self.accessible.load(Ordering::Relaxed);
        let mut locks = self.locks();
        for p in &locks.pieces {
            let end = p.at.end.min(old);
            if p.at.start < end {
                // SAFETY: inside the accessible part of the mapping (below `old`); no guest uses
                // the memory and no DMA reads the piece (the pool hands out only idle slots).
                unsafe {
                    std::ptr::write_bytes(self.mapping.base.add(p.at.start), 0, end - p.at.start)
                };
            }
        }
        locks.seen.clear();
        // A refusal is its guest's: the driver refused more page-locked memory then, or a
        // range overlapping another registration, or a write from a piece after a context
        // loss. Kept, it would leave the pieces pinned and counted against the budget for
        // every later guest while they serve none: the next guest tries again, and at worst
        // is refused once more.
        locks.refused = false;
        drop(locks);
        injected(Step::Reset)?;
        if minimum < old {
            self.mapping.protect(minimum..old, false)?;
        } else {
            self.mapping.protect(old..minimum, true)?;
        }
        self.accessible.store(minimum, Ordering::Relaxed);
        Ok(())
    }
}

/// The system calls that ready a memory for its next guest, where tests make them fail as the
/// kernel may (ENOMEM: out of memory for its page tables, or `vm.max_map_count` reached).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// Dropping its unlocked pages when its guest ends (`Slot::retire`).
    Retire,
    /// Making its next guest's size accessible (`Slot::reset`).
    Reset,
}

#[cfg(test)]
use tests::injected;

/// Tests' seam (see [`Step`]): nothing fails here.
#[cfg(not(test))]
fn injected(_: Step) -> std::io::Result<()> {
    Ok(())
}

/// Zero-fills `range` of a mapping on next touch by dropping its pages (never a locked piece's).
fn discard(m: &Mapping, range: Range<usize>) -> std::io::Result<()> {
    if range.is_empty() {
        return Ok(());
    }
    // SAFETY: the range lies inside the mapping and holds no locked page (callers pass the gaps
    // between pieces); nothing else references its bytes.
    let r = unsafe {
        libc::madvise(
            m.base.add(range.start).cast(),
            range.len(),
            libc::MADV_DONTNEED,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl Drop for Slot {
    fn drop(&mut self) {
        let bytes = self
            .locks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .bytes;
        LOCKED_BYTES.fetch_sub(bytes as u64, Ordering::Relaxed);
        if let Some(pool) = self.pool.upgrade() {
            pool.locked.fetch_sub(bytes, Ordering::Relaxed);
        }
        let mut slots = slots();
        if slots
            .get(&self.base())
            .is_some_and(|w| w.strong_count() == 0)
        {
            slots.remove(&self.base());
        }
    }
}

/// A creator's memories with locked pieces whose guests ended, and its lock budget.
struct Pool {
    idle: Mutex<Vec<Arc<Slot>>>,
    /// Memories with locked pieces that no guest may have again: their pages could not be
    /// readied for one. Kept as pooled ones are, pieces locked and counted against the budget,
    /// and for the same reason (the module header): unregistering them while the creator lives
    /// may deadlock. They go with the creator.
    spent: Mutex<Vec<Arc<Slot>>>,
    /// Bytes its memories may lock in all.
    budget: usize,
    /// Bytes they hold locked now.
    locked: AtomicUsize,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spent(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle pooled memory of this reservation with at most `room` bytes locked, for
    /// `device` if given, reset for `minimum` accessible bytes.
    fn take(
        &self,
        capacity: usize,
        guard: usize,
        minimum: usize,
        room: usize,
        device: Option<usize>,
    ) -> Option<Arc<Slot>> {
        let slot = {
            let mut pool = self.lock();
            let i = pool.iter().position(|s| {
                s.capacity == capacity && s.guard == guard && s.idle_within(room, device)
            })?;
            pool.swap_remove(i)
        };
        // One that cannot be reset (its pieces zeroed, its size not set) is never reused, nor
        // dropped: that would unregister its pieces while kernels run. Spent, and the guest
        // gets a fresh memory; the others stay pooled (a kernel out of memory for mappings
        // would fail their resets too).
        match slot.reset(minimum) {
            Ok(()) => Some(slot),
            Err(e) => {
                self.spend(slot, &e);
                None
            }
        }
    }

    /// Pools `slot`, retired, if it has locked pieces (spends it if it cannot be retired);
    /// drops (unmaps) it otherwise.
    fn give(&self, slot: Arc<Slot>) {
        if slot.locks().pieces.is_empty() {
            return;
        }
        // One that cannot drop its pages is never handed out again (reset overwrites only the
        // pieces, and the old guest's other bytes would show): spent, kept until the creator
        // goes rather than unregistered while kernels run.
        match slot.retire() {
            Ok(()) => self.lock().push(slot),
            Err(e) => self.spend(slot, &e),
        }
    }

    /// Keeps `slot` from every later guest, until the creator goes: `e` left it unfit for one.
    fn spend(&self, slot: Arc<Slot>, e: &std::io::Error) {
        tracing::debug!(
            error = %e,
            "a guest memory could not be readied for another guest: kept apart, never reused"
        );
        self.spent().push(slot);
    }
}

/// A guest memory wasmtime uses: a slot, handed back to its creator's pool on drop.
struct GuestMemory {
    slot: Arc<Slot>,
    pool: Arc<Pool>,
}

// SAFETY: the slot's mapping is a fixed reservation: `as_ptr` never changes, growth up to
// `byte_capacity` stays in place, `byte_size` bytes from it are readable and writable, and the
// guard wasmtime asked for follows the capacity, inaccessible.
unsafe impl LinearMemory for GuestMemory {
    fn byte_size(&self) -> usize {
        self.slot.accessible.load(Ordering::Relaxed)
    }

    fn byte_capacity(&self) -> usize {
        self.slot.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        let slot = &self.slot;
        let old = slot.accessible.load(Ordering::Relaxed);
        if new_size > slot.capacity {
            wasmtime::bail!(
                "a guest memory cannot grow to {new_size} bytes: its reservation is {} bytes",
                slot.capacity
            );
        }
        if new_size > old {
            slot.mapping.protect(old..new_size, true)?;
            slot.accessible.store(new_size, Ordering::Relaxed);
        }
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.slot.mapping.base
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        self.pool.give(self.slot.clone());
    }
}

// SAFETY: every memory it returns is zero-filled (fresh anonymous pages, or a pooled memory
// reset), at least `minimum` bytes accessible, and reserved for `reserved_size_in_bytes` (or its
// maximum) plus the guard, never moving; see `GuestMemory`'s LinearMemory impl.
unsafe impl MemoryCreator for GuestMemoryCreator {
    fn new_memory(
        &self,
        ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        if ty.is_shared() {
            return Err("gpuhost-wasm's guest memories are not shared memories".into());
        }
        let page = page();
        // It never moves, so it reserves what it may grow to: what wasmtime reserves, and at
        // least its maximum up to 4 GiB — an engine reserving less (`Config::memory_reservation`)
        // expects its memories to move as they grow.
        let capacity = reserved_size_in_bytes
            .unwrap_or(0)
            .max(maximum.map_or(DEFAULT_RESERVATION, |m| m.min(DEFAULT_RESERVATION)))
            .max(minimum)
            .checked_next_multiple_of(page)
            .ok_or("a guest memory's reservation overflows the address space")?;
        let guard = guard_size_in_bytes
            .checked_next_multiple_of(page)
            .ok_or("a guest memory's guard overflows the address space")?;
        // Made for a guest's instantiation (tally.rs): a pooled memory only if its pieces fit
        // what the guest's limit leaves and are locked for the guest's device (another
        // device's writes never use them), and counted for the guest from now on.
        let guest = tally::making_for();
        let room = guest.as_ref().map_or(usize::MAX, |g| {
            g.limit.saturating_sub(tally::lock(&g.tally).bytes())
        });
        let device = guest.as_ref().map(|g| g.device);
        let slot = match self.pool.take(capacity, guard, minimum, room, device) {
            Some(slot) => {
                REUSED.fetch_add(1, Ordering::Relaxed);
                if let Some(g) = &guest {
                    let bytes = slot.locks().bytes;
                    tally::lock(&g.tally).count(&slot, bytes);
                }
                slot
            }
            None => fresh_slot(&self.pool, capacity, guard, minimum)?,
        };
        MEMORIES.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(GuestMemory {
            slot,
            pool: self.pool.clone(),
        }))
    }
}

/// A new memory of `capacity` bytes and a guard, `minimum` of them accessible, registered in
/// [`SLOTS`].
fn fresh_slot(
    pool: &Arc<Pool>,
    capacity: usize,
    guard: usize,
    minimum: usize,
) -> Result<Arc<Slot>, String> {
    let len = capacity
        .checked_add(guard)
        .ok_or("a guest memory's reservation overflows the address space")?;
    let mapping = Mapping::reserve(len)?;
    mapping
        .protect(0..minimum, true)
        .map_err(|e| format!("cannot make a guest memory's {minimum} bytes accessible: {e}"))?;
    let slot = Arc::new(Slot {
        mapping: Arc::new(mapping),
        pool: Arc::downgrade(pool),
        capacity,
        guard,
        accessible: AtomicUsize::new(minimum),
        locks: Mutex::default(),
    });
    slots().insert(slot.base(), Arc::downgrade(&slot));
    Ok(slot)
}

/// The slot whose memory holds `addr`, if it is one of ours.
fn slot_of(addr: usize) -> Option<Arc<Slot>> {
    // Upgraded once the table is released: the handle may become the memory's last (another
    // thread dropping the memory meanwhile), and dropping it here would take the table again.
    let weak = slots().range(..=addr).next_back()?.1.clone();
    let slot = weak.upgrade()?;
    (addr < slot.base() + slot.capacity).then_some(slot)
}

/// A write of `bytes` that [`direct_parts`] sent direct failed in the driver: that memory's
/// writes are staged from now on, as after a refused lock.
pub(crate) fn direct_failed(bytes: &[u8]) {
    if let Some(slot) = slot_of(bytes.as_ptr() as usize) {
        slot.locks().refused = true;
    }
}

/// [`direct_parts`] for the guest whose tally is `guest`, locked only for a write that may go
/// direct: every `buffer.write` asks, and most are small.
pub(crate) fn direct_parts_for(
    host: &Arc<Host>,
    bytes: &[u8],
    guest: &SharedTally,
    max_locked: u64,
) -> Option<Vec<(LockedMemory, Range<usize>)>> {
    if bytes.len() < DIRECT_MIN {
        return None;
    }
    direct_parts(host, bytes, &mut tally::lock(guest), max_locked)
}

/// How a guest's write of `bytes` (inside one of its linear memories) can be uploaded straight
/// from that memory with `host`: the locked pieces and the range of each to upload, in order, or
/// None when it is to be staged (see the module header). Locks what the write needs and may,
/// within `max_locked` bytes across the memories `guest` counts (the guest's tally, which this
/// memory joins) and its creator's budget.
pub(crate) fn direct_parts(
    host: &Arc<Host>,
    bytes: &[u8],
    guest: &mut LockedTally,
    max_locked: u64,
) -> Option<Vec<(LockedMemory, Range<usize>)>> {
    if bytes.len() < DIRECT_MIN {
        return None;
    }
    let slot = slot_of(bytes.as_ptr() as usize)?;
    let start = bytes.as_ptr() as usize - slot.base();
    let end = start.checked_add(bytes.len())?;
    let accessible = slot.accessible.load(Ordering::Relaxed);
    if end > accessible {
        return None;
    }
    let mut locks = slot.locks();
    // A memory is locked with one device's context (gpuhost registers without
    // CU_MEMHOSTREGISTER_PORTABLE, and a LockedMemory serves its own host's streams alone):
    // writes to other devices are staged. A guest `Runtime::run` instantiates never gets such a
    // memory from the pool (`made_for`); a memory made outside that scope may be one.
    let other_device = locks.pieces.first().map(|p| p.locked.device());
    if locks.refused || other_device.is_some_and(|d| d != host.ordinal()) {
        return None;
    }
    // Locked only on a second large write into the same granules.
    let granules = start / GRANULE..(end - 1) / GRANULE + 1;
    let seen = granules.clone().all(|g| locks.seen.contains(&g));
    locks.seen.extend(granules.clone());
    if !seen {
        return None;
    }
    let span = granules.start * GRANULE..(granules.end * GRANULE).min(accessible);
    let max_locked = usize::try_from(max_locked).unwrap_or(usize::MAX);
    // The limit is the guest's, across its memories: what its other memories hold counts too.
    let others = guest.besides(&slot);
    // A memory reused from the pool keeps the last guest's pieces: they are this guest's locked
    // memory now, and over its limit its writes are staged (and the memory left uncounted: its
    // pieces serve none of this guest's writes).
    if others.saturating_add(locks.bytes) > max_locked {
        return None;
    }
    guest.count(&slot, locks.bytes);
    let pool = slot.pool.upgrade()?;
    for gap in gaps(&locks.pieces, span) {
        if locks.pieces.len() >= MAX_PIECES || others + locks.bytes + gap.len() > max_locked {
            return None;
        }
        let budget = pool.budget;
        let charged = pool
            .locked
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                l.checked_add(gap.len()).filter(|&t| t <= budget)
            });
        if charged.is_err() {
            return None;
        }
        match lock(host, &slot, gap.clone()) {
            Ok(locked) => {
                let i = locks.pieces.partition_point(|p| p.at.start < gap.start);
                locks.bytes += gap.len();
                LOCKED_BYTES.fetch_add(gap.len() as u64, Ordering::Relaxed);
                guest.count(&slot, locks.bytes);
                locks.pieces.insert(i, Piece { at: gap, locked });
            }
            Err(e) => {
                pool.locked.fetch_sub(gap.len(), Ordering::Relaxed);
                tracing::debug!(error = %e, "locking guest memory failed: its writes are staged");
                locks.refused = true;
                return None;
            }
        }
    }
    let mut parts = Vec::new();
    for p in locks
        .pieces
        .iter()
        .filter(|p| p.at.start < end && start < p.at.end)
    {
        let from = start.max(p.at.start) - p.at.start;
        let to = end.min(p.at.end) - p.at.start;
        parts.push((p.locked.clone(), from..to));
    }
    DIRECT_WRITES.fetch_add(1, Ordering::Relaxed);
    Some(parts)
}

/// The parts of `span` no piece covers, in order.
fn gaps(pieces: &[Piece], span: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = span.start;
    for p in pieces
        .iter()
        .filter(|p| p.at.start < span.end && span.start < p.at.end)
    {
        if p.at.start > at {
            out.push(at..p.at.start);
        }
        at = at.max(p.at.end);
    }
    if at < span.end {
        out.push(at..span.end);
    }
    out
}

/// Locks `range` of `slot`'s memory with `host`'s context; the piece keeps the mapping. The
/// driver pins every page of it, a time that grows with the range (up to the guest's whole
/// memory), so off the executor's worker (crate::blocking).
fn lock(host: &Arc<Host>, slot: &Slot, range: Range<usize>) -> gpuhost::Result<LockedMemory> {
    let owner = Box::new(slot.mapping.clone());
    // SAFETY: `range` lies in granule bounds and the accessible size (lock_memory refuses it unless
    // page-aligned: custom page sizes make sizes any number) and is accessible, so mapped readable
    // and writable. It stays mapped with the same pages until the owner (the mapping) drops: a
    // mapping is unmapped only when its last holder drops, its pages are never remapped, and a
    // reset discards only pages outside the pieces (it may revoke access to a piece's pages past
    // the next guest's size: mprotect keeps the pages). No other registration overlaps it: pieces
    // are disjoint (`gaps`) and the mapping is ours alone.
    crate::blocking::off_worker(|| unsafe {
        host.lock_memory(slot.mapping.base.add(range.start), range.len(), owner)
    })
}

#[cfg(test)]
mod tests;
