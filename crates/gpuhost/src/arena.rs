//! A guest arena: one virtual address range reserved up front with the driver's virtual memory
//! management API, backed by physical memory as allocations grow, never moving. Everything a
//! guest's kernels may touch lies in `[base, base + mapped)`, which is what the PTX sandbox
//! fences accesses into.
//!
//! - The range is `max_bytes` rounded up to the allocation granularity (2 MiB on an H200),
//!   aligned to at least 64 KiB (cuMemAddressReserve).
//! - Physical chunks are created, mapped right after the mapped part, made read-write for the
//!   device and zeroed (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemsetD8) when an allocation
//!   ends past `mapped`. Each chunk's handle is kept until the arena goes (see the last item).
//!   The first chunk is mapped at creation, so `mapped` is never 0: a sandboxed kernel's fenced
//!   accesses always land in mapped, zeroed (or the guest's own) memory.
//! - Allocations are 256-byte aligned ranges from a first-fit free list over `[0, max_bytes)`
//!   (lowest address first, so the mapped part stays as small as the live set allows); freed
//!   ranges are coalesced and reused.
//! - Every allocation is zeroed before it is returned, reused ranges included — unless it lies
//!   where nothing has been handed out since the arena was last zeroed whole and no kernel has
//!   been launched with one of its buffers since (then it is still zero, and the driver round
//!   trip is skipped: one per sandboxed guest's buffer). Memory written behind gpuhost's back (a
//!   kernel given an arena address as a plain integer) can show in such an allocation; it is
//!   this arena's own user's, never an earlier guest's: reuse zeroes the arena whole.
//!   Zeroing is cuMemsetD8Async
//!   on one of the host's pooled (non-blocking) streams, then a synchronize of that stream.
//!   Without the wait a launch on another non-blocking stream could overtake the zeroing. Not the
//!   legacy default stream: it is one stream for the whole context, so every thread's zeroing
//!   queued behind every other's, and its synchronize waited for all of them (under load on the
//!   H200, `gpuhost serve`'s workers were found in cuMemsetD8_v2 more than anywhere else,
//!   bench/h200-runs/2026-12-01-s6/stacks/). Nothing else can still use the range: a buffer
//!   gives its range back only when its last clone and every launch using it have ended.
//! - Reuse for another guest ([`Arena::queue_zeroing`], then [`Zeroing::fence_all`]) zeroes the
//!   whole mapped range without waiting: the memset and a fence (one for a batch of arenas) go on
//!   a stream the caller keeps for resets, and the arena
//!   stays inside an [`ArenaReset`] until the completion thread has seen the fence pass, so no
//!   allocation (and no guest) reaches it before it is zero. A request thread then never waits
//!   for the device to reuse an arena (the synchronize it replaced took 15–30 µs per `gpuhost
//!   serve` request on the H200, bench/h200-runs/2026-12-02-s11/).
//! - The arena goes when its last holder does: buffers (and the [`Arena::anchor`] a launch may
//!   hold) keep it alive. It then unmaps every chunk, releases the chunks' handles and frees
//!   the reservation. An arena of a dead context generation still releases its handles: on
//!   NVIDIA's driver physical memory is a device object that outlives a context reset (an H200
//!   keeps it counted as used until cuMemRelease), so forgetting them would leak it for the
//!   life of the process. Its addresses are touched only where the driver still shows our own
//!   chunk mapped there (cuMemRetainAllocationHandle answers our handle, which no one else can
//!   hold while we keep it). On the H200 the reservation and mappings outlive the reset too, so
//!   everything is undone; the check guards a driver whose reservations die with the context,
//!   whose addresses may then belong to the new one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::sys;

use crate::buffer::DeviceBuffer;
use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::result::{self, has_symbol, vmm};
use crate::stats::Counters;
use crate::stream::Stream;

/// Alignment of every allocation in an arena (as cuMemAlloc guarantees).
pub const ARENA_ALIGN: u64 = 256;

/// The smallest alignment of an arena's base (the sandbox relies on it).
const MIN_BASE_ALIGN: u64 = 64 << 10;

/// The driver entry points an arena needs; an older driver lacking one cannot host arenas.
const VMM_CALLS: &[&str] = &[
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemRetainAllocationHandle",
];

/// A guest's memory: one fixed virtual range, mapped as it fills. See the module docs.
pub struct Arena {
    host: Arc<Host>,
    generation: u64,
    base: u64,
    reserved: u64,
    /// Allocations end at or below this (max_bytes rounded up to [`ARENA_ALIGN`]).
    limit: u64,
    granularity: u64,
    /// Bytes mapped from base, readable without the lock.
    mapped: AtomicU64,
    /// Bytes in live allocations (256-byte rounded).
    used: AtomicU64,
    /// A kernel was launched with a buffer of the arena since it was last zeroed whole: it may
    /// have written anywhere in the mapped range (a sandboxed kernel's window is all of it).
    kernels_since_zeroed: AtomicBool,
    state: Mutex<State>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("device", &self.host.ordinal())
            .field("base", &format_args!("{:#x}", self.base))
            .field("reserved", &self.reserved)
            .field("mapped", &self.mapped())
            .field("used", &self.used())
            .field("generation", &self.generation)
            .finish()
    }
}

/// An arena whose zeroing is queued and fenced ([`Zeroing::fence_all`]): it holds the arena until
/// the zeroing has completed.
pub struct ArenaReset {
    arena: Arc<Arena>,
    /// The reset stream's fence after the zeroing (the completion thread marks it done).
    done: Completion,
}

impl std::fmt::Debug for ArenaReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaReset")
            .field("arena", &self.arena)
            .field("done", &self.is_done())
            .finish()
    }
}

impl ArenaReset {
    /// Whether the zeroing has completed (or failed); no driver call.
    pub fn is_done(&self) -> bool {
        self.done.is_done()
    }

    /// The arena, zeroed, once the zeroing has completed; `Err(self)` while it has not (no
    /// driver call either way). `Ok(Err(_))` when the zeroing failed or the arena's context is
    /// gone: the arena is dropped (freed), never handed out.
    pub fn ready(self) -> std::result::Result<Result<Arc<Arena>>, Self> {
        if !self.done.is_done() {
            return Err(self);
        }
        let Self { arena, done } = self;
        // Done, so this returns its outcome without waiting.
        Ok(done.wait().and_then(|()| still_current(arena)))
    }

    /// The arena, zeroed, once the zeroing has completed: awaited without blocking the thread
    /// (the completion thread wakes the task). An error when the zeroing failed or the arena's
    /// context is gone: the arena is dropped (freed), never handed out. Dropping the future
    /// before then drops the arena too, which the fence keeps mapped until the zeroing is done.
    pub async fn zeroed(self) -> Result<Arc<Arena>> {
        let Self { arena, done } = self;
        done.await?;
        still_current(arena)
    }
}

/// A zeroed arena, unless its context has gone meanwhile (it is dropped then: freed).
fn still_current(arena: Arc<Arena>) -> Result<Arc<Arena>> {
    let now = arena.host.generation();
    if now == arena.generation {
        Ok(arena)
    } else {
        Err(Error::ContextLost { generation: now })
    }
}

/// An arena whose zeroing is queued ([`Arena::queue_zeroing`]) and not yet fenced.
/// [`Zeroing::fence_all`] turns a batch of them into [`ArenaReset`]s sharing one fence (one event
/// for the completion thread to watch). Dropped unfenced, it fences itself first, so the arena is
/// never freed under its own zeroing.
pub struct Zeroing {
    /// Taken by `fence_all`.
    arena: Option<Arc<Arena>>,
    stream_generation: u64,
}

impl Zeroing {
    /// One fence on `stream` (the stream every zeroing was queued on) after all of `zeroings`:
    /// each comes back as an [`ArenaReset`] done when the fence is. On an error (a lost context)
    /// the arenas are dropped (freed): their memory went with the context.
    pub fn fence_all(mut zeroings: Vec<Zeroing>, stream: &Stream) -> Result<Vec<ArenaReset>> {
        if zeroings
            .iter()
            .any(|z| z.stream_generation != stream.generation())
        {
            return Err(Error::ContextLost {
                generation: stream.generation(),
            });
        }
        let arenas: Vec<Arc<Arena>> = zeroings.iter_mut().filter_map(|z| z.arena.take()).collect();
        let anchors: Vec<DeviceBuffer> = arenas.iter().map(|a| a.anchor()).collect();
        let anchored: Vec<&DeviceBuffer> = anchors.iter().collect();
        // The fence's batch keeps an anchor of each until the zeroing is done: an ArenaReset
        // dropped before then (its pool gone) leaves the arena to the completion thread, which
        // frees it only once the memset no longer writes into it.
        let done = stream.fence_keeping(&anchored, None)?;
        Ok(arenas
            .into_iter()
            .map(|arena| ArenaReset {
                arena,
                done: done.share(),
            })
            .collect())
    }
}

impl Drop for Zeroing {
    fn drop(&mut self) {
        let Some(arena) = self.arena.take() else {
            return;
        };
        // Not fenced: a fence keeping its anchor, so its memory outlives the memset. Without a
        // stream of its generation the context is gone, and the memory with it.
        if let Ok(stream) = arena.host.stream_in(self.stream_generation) {
            drop(stream.fence_keeping(&[&arena.anchor()], None));
        }
    }
}

/// One mapped chunk: `len` bytes at `offset`, backed by the physical allocation `handle`, whose
/// cuMemCreate reference the arena holds until it goes.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    offset: u64,
    len: u64,
    handle: sys::CUmemGenericAllocationHandle,
}

#[derive(Default)]
struct State {
    /// Free ranges below `limit`: offset → length, non-adjacent (coalesced).
    free: BTreeMap<u64, u64>,
    /// Mapped chunks, in address order.
    chunks: Vec<Chunk>,
    mapped: u64,
    /// Nothing has been handed out at or past this offset since the arena was last zeroed
    /// whole: while no kernel has run on it either, memory there is still zero.
    untouched_from: u64,
}

impl State {
    /// First fit: the lowest free range of at least `size` bytes, taken.
    fn take(&mut self, size: u64) -> Option<u64> {
        let (&off, &len) = self.free.iter().find(|&(_, &len)| len >= size)?;
        self.free.remove(&off);
        if len > size {
            self.free.insert(off + size, len - size);
        }
        Some(off)
    }

    /// Gives `[off, off + size)` back, merged with free neighbours.
    fn give(&mut self, mut off: u64, mut size: u64) {
        if let Some((&p_off, &p_len)) = self.free.range(..off).next_back()
            && p_off + p_len == off
        {
            self.free.remove(&p_off);
            off = p_off;
            size += p_len;
        }
        if let Some(n_len) = self.free.remove(&(off + size)) {
            size += n_len;
        }
        self.free.insert(off, size);
    }

    /// The largest free range (for the error message).
    fn largest_free(&self) -> u64 {
        self.free.values().copied().max().unwrap_or(0)
    }
}

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|n| n / to * to)
}

/// Pinned device memory on the host's device.
fn device_prop(ordinal: usize) -> sys::CUmemAllocationProp {
    // SAFETY: CUmemAllocationProp is a plain C struct for which all-zero bytes are valid (the
    // zero of each enum field is one of its variants); the fields that matter are set below.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: ordinal as i32,
    };
    prop
}

/// The first of [`VMM_CALLS`] the loaded driver lacks, if any. Looked up once: a process loads
/// one driver, and a sandboxed guest's Store makes an arena, so the lookups (a dlsym each) were
/// repeated for every guest.
fn missing_vmm_call() -> Option<&'static str> {
    static MISSING: OnceLock<Option<&'static str>> = OnceLock::new();
    *MISSING.get_or_init(|| VMM_CALLS.iter().copied().find(|n| !has_symbol(n)))
}

impl Host {
    /// A guest arena of `max_bytes` (at least one granule): one virtual range reserved with
    /// cuMemAddressReserve, physical memory mapped as allocations grow, never moving.
    pub fn arena(self: &Arc<Self>, max_bytes: u64) -> Result<Arc<Arena>> {
        self.fresh(|| Arena::create(self, max_bytes))
    }
}

impl Arena {
    fn create(host: &Arc<Host>, max_bytes: u64) -> Result<Arc<Arena>> {
        let generation = host.enter()?;
        if let Some(missing) = missing_vmm_call() {
            return Err(Error::Unsupported {
                feature: "guest arenas",
                reason: format!("the driver lacks {missing} (virtual memory management)"),
            });
        }
        // dev came from cuDeviceGet.
        let supported = host.check(result::ctx::attribute(
            host.dev,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
        ))?;
        if supported == 0 {
            return Err(Error::Unsupported {
                feature: "guest arenas",
                reason: "the device does not support virtual memory management".into(),
            });
        }
        let prop = device_prop(host.ordinal());
        let granularity = host.check(vmm::granularity(
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        ))?;
        let granularity = (granularity as u64).max(1);
        let too_big = || Error::ArenaFull {
            requested: max_bytes,
            used: 0,
            limit: 0,
            largest_free: 0,
        };
        let limit = round_up(max_bytes.max(1), ARENA_ALIGN).ok_or_else(too_big)?;
        let reserved = round_up(limit, granularity).ok_or_else(too_big)?;
        let align = granularity.max(MIN_BASE_ALIGN).next_power_of_two();
        // SAFETY: context bound by enter(); the arena frees the range once, when it goes (on
        // error below too: it drops).
        let base = host.check(unsafe { vmm::reserve(reserved as usize, align as usize) })?;
        Counters::inc(&host.counters.live_arenas);
        let mut state = State::default();
        state.free.insert(0, limit);
        let arena = Arc::new(Arena {
            host: Arc::clone(host),
            generation,
            base,
            reserved,
            limit,
            granularity,
            mapped: AtomicU64::new(0),
            used: AtomicU64::new(0),
            kernels_since_zeroed: AtomicBool::new(false),
            state: Mutex::new(state),
        });
        // The first chunk at once: `[base, base + mapped)` is never empty, so a fenced access
        // of a kernel launched before any allocation still lands in mapped memory. (On error
        // the arena drops, freeing its reservation.)
        arena.grow(&mut arena.lock(), 1)?;
        Ok(arena)
    }

    /// Device address of the range (aligned to at least 64 KiB).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes mapped from `base` (at least one granule): every live allocation lies in
    /// `[base, base + mapped)`, and all of it is device-accessible.
    pub fn mapped(&self) -> u64 {
        self.mapped.load(Ordering::Acquire)
    }

    /// Bytes of address space reserved (`max_bytes` rounded up to the granularity).
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Bytes in live allocations (each rounded up to 256).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The driver's allocation granularity: the arena maps in multiples of it.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    /// The context generation the arena belongs to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each state change is complete before any call that can fail or panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `bytes` of zeroed device memory, 256-byte aligned, inside the arena: a [`DeviceBuffer`]
    /// like any other (launch arguments, transfers, fill, copy) that keeps the arena alive.
    /// More than the arena has free is [`Error::ArenaFull`].
    pub fn alloc(self: &Arc<Self>, bytes: u64) -> Result<DeviceBuffer> {
        self.host.enter_for(self.generation)?;
        let full = |st: &State| Error::ArenaFull {
            requested: bytes,
            used: self.used(),
            limit: self.limit,
            largest_free: st.largest_free(),
        };
        let len = usize::try_from(bytes).map_err(|_| full(&self.lock()))?;
        let size = round_up(bytes.max(1), ARENA_ALIGN).ok_or_else(|| full(&self.lock()))?;
        let (offset, still_zero) = {
            let mut st = self.lock();
            let offset = st.take(size).ok_or_else(|| full(&st))?;
            if offset + size > st.mapped
                && let Err(e) = self.grow(&mut st, offset + size)
            {
                st.give(offset, size);
                return Err(e);
            }
            // Still zero since the arena was (its chunks are zeroed as they are mapped): no
            // need to zero it again, which is a driver round trip per allocation.
            let still_zero =
                offset >= st.untouched_from && !self.kernels_since_zeroed.load(Ordering::SeqCst);
            st.untouched_from = st.untouched_from.max(offset + size);
            (offset, still_zero)
        };
        if !still_zero && let Err(e) = self.zero(offset, size) {
            self.lock().give(offset, size);
            return Err(e);
        }
        self.used.fetch_add(size, Ordering::AcqRel);
        Ok(DeviceBuffer::from_arena(self, offset, size, len))
    }

    /// A kernel is about to be launched with a buffer of this arena (gpuhost's launches note it,
    /// before the driver call): from now on an allocation is zeroed even where nothing was
    /// handed out, since the kernel may write anywhere the mapped range reaches.
    pub(crate) fn note_kernel(&self) {
        if !self.kernels_since_zeroed.load(Ordering::Relaxed) {
            self.kernels_since_zeroed.store(true, Ordering::SeqCst);
        }
    }

    /// A zero-length buffer at `base` that keeps the arena alive: pass it as
    /// `Arg::Buffer(&anchor, 0)` for a kernel parameter that receives the arena's base (the
    /// sandbox's hidden `base`), so the arena outlives every launch given it, even one whose
    /// other arguments are not buffers of the arena.
    pub fn anchor(self: &Arc<Self>) -> DeviceBuffer {
        DeviceBuffer::from_arena(self, 0, 0, 0)
    }

    /// Maps chunks until `[0, end)` is mapped and device-accessible.
    fn grow(&self, st: &mut State, end: u64) -> Result<()> {
        let target = round_up(end, self.granularity).ok_or(Error::ArenaFull {
            requested: end,
            used: self.used(),
            limit: self.limit,
            largest_free: st.largest_free(),
        })?;
        let (at, len) = (st.mapped, target - st.mapped);
        let prop = device_prop(self.host.ordinal());
        // SAFETY: the context is bound (alloc entered it); the handle is released once: below
        // on failure, else by the arena when it goes.
        let handle = self
            .host
            .check(unsafe { vmm::create(len as usize, &prop) })?;
        let ptr = self.base + at;
        // SAFETY: [ptr, ptr + len) lies in our reservation right after the mapped part, so it
        // holds no mapping; len is a multiple of the granularity, as is ptr.
        let r = unsafe { vmm::map(ptr, len as usize, handle) };
        let mapped = self.host.check(r).and_then(|()| {
            let desc = sys::CUmemAccessDesc {
                location: prop.location,
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: the range was just mapped.
            let r = unsafe { vmm::set_access(ptr, len as usize, &desc) };
            // Zeroed before it counts as mapped: a sandboxed kernel may read all of
            // [base, base + mapped), and physical memory recycled inside the process may still
            // hold an earlier arena's (another guest's) bytes.
            self.host
                .check(r)
                .and_then(|()| self.zero(at, len))
                .inspect_err(|_| {
                    // SAFETY: undoes the mapping just made, which nothing can use yet.
                    let _ = unsafe { vmm::unmap(ptr, len as usize) };
                })
        });
        if let Err(e) = mapped {
            // SAFETY: releases cuMemCreate's one reference, once; the mapping (if any) is gone.
            let r = unsafe { vmm::release(handle) };
            if let Err(re) = self.host.check(r) {
                self.host
                    .drop_error("releasing a failed arena chunk's handle", &re);
            }
            return Err(e);
        }
        st.chunks.push(Chunk {
            offset: at,
            len,
            handle,
        });
        st.mapped = target;
        self.mapped.store(target, Ordering::Release);
        Ok(())
    }

    /// Zeroes `[offset, offset + size)` and waits until it is done (see the module docs).
    fn zero(&self, offset: u64, size: u64) -> Result<()> {
        let stream = self.host.stream_in(self.generation)?;
        // SAFETY: the range is mapped, device-accessible and handed to nobody yet; the stream
        // is of the bound context, which the synchronize below waits for.
        let r = unsafe {
            result::mem::set_d8_async(self.base + offset, 0, size as usize, stream.raw())
        };
        self.host.check_at(r, self.generation)?;
        stream.synchronize()
    }

    /// Whether anything but the caller holds the arena: another handle, a buffer, or an anchor
    /// (so a launch given one).
    pub fn is_held(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) != 1 || self.used() != 0
    }

    /// Makes the arena ready for another guest when nothing but the caller holds it any more
    /// (no buffer, no anchor, so no launch given one): queues the zeroing of everything mapped,
    /// `[base, base + mapped)`, which is all a sandboxed kernel can reach, on `stream`, and
    /// returns at once. [`Zeroing::fence_all`] then fences it (with others queued on the same
    /// stream: one fence for all), and the arena comes back through [`ArenaReset::ready`] only
    /// once the stream has passed the zeroing, so nothing the last guest wrote is readable by
    /// the next, and no one can allocate in it meanwhile. `Ok(Err(arena))`, changing nothing,
    /// while anything else holds it. On an error the arena is dropped (freed).
    ///
    /// `stream` should be one no guest launches on: the zeroing waits behind whatever is queued
    /// there.
    pub fn queue_zeroing(
        self: Arc<Self>,
        stream: &Stream,
    ) -> Result<std::result::Result<Zeroing, Arc<Arena>>> {
        // The caller's Arc is the only one, so no buffer or anchor can appear meanwhile.
        if self.is_held() {
            return Ok(Err(self));
        }
        if !Arc::ptr_eq(stream.host(), &self.host) {
            return Err(Error::DeviceMismatch {
                what: "stream",
                expected: self.host.ordinal(),
                found: stream.host().ordinal(),
            });
        }
        let generation = self.host.enter_for(self.generation)?;
        if stream.generation() != generation {
            return Err(Error::ContextLost { generation });
        }
        {
            let mut st = self.lock();
            // SAFETY: the range is mapped and device-accessible, and no one else holds the arena
            // (so no buffer of it and no launch given one is left); the stream belongs to the
            // bound context (generation checked). The arena is handed out again only once the
            // stream has passed this (ArenaReset::ready), and freed before then only once a
            // fence has passed it (Zeroing's drop).
            let r = unsafe {
                result::mem::set_d8_async(self.base, 0, st.mapped as usize, stream.raw())
            };
            self.host.check_at(r, generation)?;
            st.untouched_from = 0;
        }
        self.kernels_since_zeroed.store(false, Ordering::SeqCst);
        Ok(Ok(Zeroing {
            arena: Some(self),
            stream_generation: generation,
        }))
    }

    /// A buffer's range comes back (its last holder and every launch using it are gone).
    pub(crate) fn give_back(&self, offset: u64, size: u64) {
        if size == 0 {
            return;
        }
        self.lock().give(offset, size);
        self.used.fetch_sub(size, Ordering::AcqRel);
    }
}

impl Arena {
    /// Releases a handle the arena holds (one cuMemCreate reference), recording a failure.
    fn release_handle(&self, handle: sys::CUmemGenericAllocationHandle) {
        // SAFETY: the arena's own reference, released once (the chunk list was taken).
        let r = unsafe { vmm::release(handle) };
        if let Err(e) = self.host.check(r) {
            self.host
                .drop_error("releasing an arena chunk's handle", &e);
        }
    }

    /// The arena's generation is live: unmap everything, release the handles, free the range.
    fn release_live(&self, chunks: Vec<Chunk>) {
        let mapped: u64 = chunks.iter().map(|c| c.len).sum();
        // One call for all chunks (they tile [base, base + mapped)): softcuda then waits once for
        // kernels still holding the range, not once per chunk. A driver that wants one call per
        // cuMemMap gets them.
        let all = if mapped > 0 {
            // SAFETY: exactly the chunks we mapped; no buffer of the arena is left, so no launch
            // given one (or the anchor) is still running.
            unsafe { vmm::unmap(self.base, mapped as usize) }
        } else {
            Ok(())
        };
        if all.is_err() {
            for c in &chunks {
                // SAFETY: as above, one chunk at a time.
                let r = unsafe { vmm::unmap(self.base + c.offset, c.len as usize) };
                if let Err(e) = self.host.check(r) {
                    self.host.drop_error("unmapping an arena chunk", &e);
                }
            }
        }
        for c in chunks {
            self.release_handle(c.handle);
        }
        // SAFETY: the whole reservation, with nothing mapped in it any more.
        let r = unsafe { vmm::free(self.base, self.reserved as usize) };
        if let Err(e) = self.host.check(r) {
            self.host.drop_error("freeing an arena's address range", &e);
        }
    }

    /// The arena's context is gone (the current one is bound): release what outlived it. A
    /// chunk still mapped at its address (the driver answers our handle for it) is unmapped,
    /// and then the reservation is ours too and is freed; an address the driver does not show
    /// as our chunk is left alone, since it may now be the new context's.
    fn release_dead(&self, chunks: Vec<Chunk>) {
        let mut range_survived = false;
        for c in chunks {
            let at = self.base + c.offset;
            // SAFETY: a query (an address without a mapping is an error code); the reference it
            // takes is released just below.
            if let Ok(found) = unsafe { vmm::retain_handle(at) } {
                // The query took a reference of its own.
                self.release_handle(found);
                if found == c.handle {
                    range_survived = true;
                    // SAFETY: our own chunk, still mapped at its address: the driver says so.
                    let r = unsafe { vmm::unmap(at, c.len as usize) };
                    if let Err(e) = self.host.check(r) {
                        self.host.drop_error("unmapping a dead arena's chunk", &e);
                    }
                }
            }
            self.release_handle(c.handle);
        }
        if range_survived {
            // SAFETY: the reservation outlived its context (our chunk was still mapped in it),
            // so it is still ours; nothing is mapped in it any more.
            let r = unsafe { vmm::free(self.base, self.reserved as usize) };
            if let Err(e) = self.host.check(r) {
                self.host
                    .drop_error("freeing a dead arena's address range", &e);
            }
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        Counters::dec(&self.host.counters.live_arenas);
        let chunks = std::mem::take(&mut self.lock().chunks);
        match self.host.enter_for(self.generation) {
            Ok(_) => self.release_live(chunks),
            // enter_for bound the new context before refusing the old generation.
            Err(Error::ContextLost { .. }) => self.release_dead(chunks),
            Err(e) => self
                .host
                .drop_error("binding the context to release an arena", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_control_blocks_and_buffers_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Arena>();
        send_sync::<Arc<Arena>>();
        send_sync::<crate::ControlBlock>();
        send_sync::<DeviceBuffer>();
    }

    #[test]
    fn first_fit_takes_the_lowest_range_and_coalesces_on_give() {
        let mut st = State::default();
        st.free.insert(0, 4096);
        let a = st.take(256).unwrap();
        let b = st.take(512).unwrap();
        let c = st.take(256).unwrap();
        assert_eq!((a, b, c), (0, 256, 768));
        st.give(b, 512);
        assert_eq!(
            st.take(300),
            Some(256),
            "the hole left by b is reused first"
        );
        st.give(256, 300);
        st.give(a, 256);
        st.give(c, 256);
        assert_eq!(st.free.len(), 1, "all free space merged: {:?}", st.free);
        assert_eq!(st.free.get(&0), Some(&4096));
        assert_eq!(st.take(4097), None);
        assert_eq!(st.largest_free(), 4096);
    }
}
