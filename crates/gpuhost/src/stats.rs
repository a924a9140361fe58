//! Live-object and event counters of a host, for leak checks and diagnostics.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

/// A snapshot of a host's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostStats {
    /// The context generation (starts at 1; +1 per detected loss).
    pub generation: u64,
    /// Device buffers alive.
    pub live_buffers: u64,
    /// Modules loaded and not unloaded.
    pub live_modules: u64,
    /// Streams created and not destroyed (pooled ones included).
    pub live_streams: u64,
    /// Events created and not destroyed (pooled ones included).
    pub live_events: u64,
    /// Launches enqueued and not yet completed.
    pub pending_launches: u64,
    /// Launches enqueued in total.
    pub launches: u64,
    /// Context losses detected.
    pub context_losses: u64,
    /// Errors recorded by Drop implementations (freeing or unloading failed).
    pub drop_errors: u64,
    /// Guest arenas alive (their reservations not yet freed).
    pub live_arenas: u64,
    /// Control blocks alive.
    pub live_control_blocks: u64,
    /// Page-locked regions registered with a context so far (cuMemHostRegister: a region newly
    /// allocated, or one re-registered after a context loss). Flat while transfers are served
    /// by the pool (see [`Host::reserve_staging`](crate::Host::reserve_staging)).
    pub pinned_registrations: u64,
    /// Registrations of someone else's memory ([`Host::lock_memory`](crate::Host::lock_memory),
    /// and again after a context loss) so far; not counted in `pinned_registrations`.
    pub locked_registrations: u64,
    /// Device allocations made by the driver (cuMemAlloc) so far: an allocation served by a
    /// kept block is not one (see [`Host::set_alloc_cache_limit`](crate::Host::set_alloc_cache_limit)).
    pub driver_allocs: u64,
    /// Bytes of freed allocations kept for reuse now.
    pub kept_alloc_bytes: u64,
    /// Batches of launches completed by the `.await` that recorded them, on its own thread,
    /// rather than by the host's completion thread (see `Host::set_await_spin`).
    pub batches_completed_by_poll: u64,
    /// Times the driver was asked whether a stream given back is idle (cuStreamQuery, at its
    /// drop and while it drains); a stream marked settled
    /// ([`Stream::mark_settled`](crate::Stream::mark_settled)) is pooled without asking.
    pub stream_idle_queries: u64,
    /// Bytes pageable transfers (`Stream::upload`, `download`) moved through staging chunks.
    pub staged_bytes: u64,
    /// Nanoseconds those transfers spent copying between the caller's memory and staging (the
    /// calling thread's view of each parallel copy, yields excluded): `staged_bytes` over this
    /// is the host copy's rate while the DMAs run beside it.
    pub staging_copy_ns: u64,
    /// Nanoseconds those transfers spent awaiting a chunk's DMA: with the copy time, what a
    /// pipeline bound by the DMA engine (long waits) or by the host copy (short ones) shows.
    pub staging_wait_ns: u64,
}

/// An atomic counter alone on its cache line.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct Padded(pub(crate) AtomicU64);

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) live_buffers: AtomicU64,
    pub(crate) live_modules: AtomicU64,
    pub(crate) live_streams: AtomicU64,
    pub(crate) live_events: AtomicU64,
    /// Launches enqueued (written by launching threads only).
    pub(crate) launches: Padded,
    /// Launches completed (written by completing threads only): pending is the difference. Kept
    /// on its own cache line so launching and completing threads do not bounce one line.
    pub(crate) completed: Padded,
    pub(crate) context_losses: AtomicU64,
    pub(crate) drop_errors: AtomicU64,
    pub(crate) live_arenas: AtomicU64,
    pub(crate) live_control_blocks: AtomicU64,
    pub(crate) pinned_registrations: AtomicU64,
    pub(crate) locked_registrations: AtomicU64,
    pub(crate) driver_allocs: AtomicU64,
    pub(crate) batches_completed_by_poll: AtomicU64,
    pub(crate) stream_idle_queries: AtomicU64,
    pub(crate) staged_bytes: AtomicU64,
    pub(crate) staging_copy_ns: AtomicU64,
    pub(crate) staging_wait_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }

    pub(crate) fn dec(c: &AtomicU64) {
        c.fetch_sub(1, Relaxed);
    }

    pub(crate) fn snapshot(&self, generation: u64) -> HostStats {
        HostStats {
            generation,
            live_buffers: self.live_buffers.load(Relaxed),
            live_modules: self.live_modules.load(Relaxed),
            live_streams: self.live_streams.load(Relaxed),
            live_events: self.live_events.load(Relaxed),
            // Completed first: a launch is counted before it can complete, so the difference
            // is never negative (saturating regardless).
            pending_launches: {
                let done = self.completed.0.load(Acquire);
                self.launches.0.load(Acquire).saturating_sub(done)
            },
            launches: self.launches.0.load(Relaxed),
            context_losses: self.context_losses.load(Relaxed),
            drop_errors: self.drop_errors.load(Relaxed),
            live_arenas: self.live_arenas.load(Relaxed),
            live_control_blocks: self.live_control_blocks.load(Relaxed),
            pinned_registrations: self.pinned_registrations.load(Relaxed),
            locked_registrations: self.locked_registrations.load(Relaxed),
            driver_allocs: self.driver_allocs.load(Relaxed),
            // Filled in by Host::stats (the cache keeps its own count).
            kept_alloc_bytes: 0,
            batches_completed_by_poll: self.batches_completed_by_poll.load(Relaxed),
            stream_idle_queries: self.stream_idle_queries.load(Relaxed),
            staged_bytes: self.staged_bytes.load(Relaxed),
            staging_copy_ns: self.staging_copy_ns.load(Relaxed),
            staging_wait_ns: self.staging_wait_ns.load(Relaxed),
        }
    }
}
