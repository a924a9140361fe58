//! The device host: one per device ordinal for the process, holding exactly one primary-context
//! retain, binding it on every entry, and detecting a context torn down under it.
//!
//! Identity is checked with cuCtxGetId, not the handle value: a re-created primary context gets
//! the same handle value but a new id. On loss the host re-retains (the old retain died with the
//! old context, so it is never released), bumps its generation, and every handle of an older
//! generation refuses to be used.

use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Acquire, Ordering::Release};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{self, CUcontext, CUctx_st, CUdevice, CUevent, CUresult, CUstream};

use crate::buffer::DeviceBuffer;
use crate::completion::Completer;
use crate::driver;
use crate::error::{Error, Result};
use crate::facts::{DeviceFacts, MemInfo};
use crate::launch::Limits;
use crate::result::{self, DriverError, DriverResult, has_symbol, is_context_gone, is_sticky};
use crate::stats::{Counters, HostStats};
use crate::stream::Stream;

/// One device's primary context, held for the process's lifetime.
pub struct Host {
    ordinal: usize,
    pub(crate) dev: CUdevice,
    facts: DeviceFacts,
    /// The retained primary context of the current generation.
    ctx: AtomicPtr<CUctx_st>,
    /// What every entry and every launch reads (see [`Hot`]).
    hot: Hot,
    /// Serialises recovery so one loss yields one re-retain and one generation step.
    recovery: Mutex<()>,
    pub(crate) counters: Counters,
    /// Pooled streams and events, tagged with their generation (stale ones are dropped, never destroyed).
    streams: Mutex<Vec<(u64, usize)>>,
    /// Dropped streams that still had work running: pooled only once idle (see
    /// `return_stream`), so the next user never queues behind a previous user's kernel.
    draining: Mutex<Vec<(u64, usize)>>,
    events: Mutex<Vec<(u64, usize)>>,
    timing_events: Mutex<Vec<(u64, usize)>>,
    /// Pooled page-locked regions: host buffers and transfers' staging chunks (see pinned.rs).
    pub(crate) pinned: crate::pinned::Pool,
    /// How pageable transfers are staged (see transfer.rs).
    pub(crate) transfer: Mutex<crate::transfer::TransferConfig>,
    pub(crate) completer: OnceLock<Completer>,
    /// Nanoseconds a `Completion`'s poll spins before it returns Pending (see completion.rs).
    pub(crate) await_spin_ns: std::sync::atomic::AtomicU64,
    /// Whether staging may page-lock more memory than is pooled ([`Host::set_staging_growth`]).
    pub(crate) staging_growth: std::sync::atomic::AtomicBool,
    /// Control blocks' memory (see control_pool.rs), made on first use.
    pub(crate) control: Mutex<Option<Arc<crate::control_pool::ControlPool>>>,
    /// Freed allocations kept for reuse (see alloc_cache.rs).
    pub(crate) alloc_cache: crate::alloc_cache::AllocCache,
    /// Buffers' own allocations: stream-ordered, so a free never waits (see device_alloc.rs).
    pub(crate) device_alloc: crate::device_alloc::DeviceAlloc,
    /// Releases that wait for running kernels, made on a background thread (see deferred.rs).
    pub(crate) deferred: Arc<crate::deferred::Deferred>,
}

/// The context's identity and the device's launch limits: what every entry and every launch
/// reads, on one cache line of its own. Written only by a recovery, so a launching thread keeps
/// it in its cache. Left to the compiler's field order, these sat on three lines of `Host` (at
/// bebd7e8: the id and generation beside the page-locked pool, whose lock transfers on other
/// threads take; the limits and `has_ctx_id` on two lines of their own), two lines per launch
/// more to miss after a driver call.
#[repr(C, align(64))]
struct Hot {
    /// cuCtxGetId of `ctx` when we retained it (0 when the driver lacks cuCtxGetId).
    ctx_id: AtomicU64,
    generation: AtomicU64,
    /// The device's limits a launch is checked against (a copy of `facts`' own).
    limits: Limits,
    has_ctx_id: bool,
}

// SAFETY: the raw handles inside (device ordinal, context pointer in an atomic, pooled handle
// values) are process-wide driver objects usable from any thread once the context is current,
// which every entry point ensures; mutable state is behind atomics and mutexes.
unsafe impl Send for Host {}
// SAFETY: as above; all shared mutation goes through atomics or mutexes.
unsafe impl Sync for Host {}

static HOSTS: Mutex<Option<HashMap<usize, Arc<Host>>>> = Mutex::new(None);

/// The process's host for device `ordinal` (created on first call; the same Arc afterwards).
/// A failed creation is not cached: the next call tries again.
pub fn host(ordinal: usize) -> Result<Arc<Host>> {
    let mut hosts = HOSTS.lock().unwrap_or_else(|p| p.into_inner());
    let map = hosts.get_or_insert_with(HashMap::new);
    if let Some(h) = map.get(&ordinal) {
        return Ok(h.clone());
    }
    let h = Arc::new(Host::create(ordinal)?);
    map.insert(ordinal, h.clone());
    Ok(h)
}

impl Host {
    fn create(ordinal: usize) -> Result<Self> {
        let info = driver::driver()?;
        let count = driver::device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        // Driver initialised; ordinal < count.
        let dev = result::ctx::device(ordinal as i32)?;
        let facts = DeviceFacts::read(ordinal, dev, info.version)?;
        let limits = Limits::of(&facts);
        let has_ctx_id = has_symbol("cuCtxGetId");
        // SAFETY: this is the host's one retain, released never (the host lives for the
        // process) or lost with the context.
        let ctx = unsafe { result::ctx::primary_retain(dev) }?;
        // SAFETY: ctx was just retained.
        unsafe { result::ctx::set_current(ctx) }?;
        let id = if has_ctx_id { read_ctx_id(ctx)? } else { 0 };
        tracing::debug!(ordinal, name = %facts.name, driver = %info.kind, "host created");
        Ok(Self {
            ordinal,
            dev,
            facts,
            ctx: AtomicPtr::new(ctx),
            hot: Hot {
                ctx_id: AtomicU64::new(id),
                generation: AtomicU64::new(1),
                limits,
                has_ctx_id,
            },
            recovery: Mutex::new(()),
            counters: Counters::default(),
            streams: Mutex::new(Vec::new()),
            draining: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            timing_events: Mutex::new(Vec::new()),
            pinned: Default::default(),
            transfer: Default::default(),
            completer: OnceLock::new(),
            await_spin_ns: crate::completion::DEFAULT_AWAIT_SPIN_NS.into(),
            staging_growth: true.into(),
            control: Mutex::new(None),
            alloc_cache: crate::alloc_cache::AllocCache::new(),
            device_alloc: Default::default(),
            deferred: Default::default(),
        })
    }

    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Device facts, read from the driver when the host was created.
    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// The device's limits a launch is checked against (on the line `enter` reads).
    #[inline]
    pub(crate) fn limits(&self) -> &Limits {
        &self.hot.limits
    }

    /// The context generation: 1 at creation, +1 per detected context loss.
    pub fn generation(&self) -> u64 {
        self.hot.generation.load(Acquire)
    }

    /// Counters of live objects and events.
    pub fn stats(&self) -> HostStats {
        let mut stats = self.counters.snapshot(self.generation());
        stats.kept_alloc_bytes = self.alloc_cache.bytes() as u64;
        stats
    }

    /// The raw primary context of the current generation (for benchmarks and tests that compare
    /// with the raw driver API; gpuhost owns its one retain).
    pub fn raw_context(&self) -> CUcontext {
        self.ctx.load(Acquire)
    }

    /// Bind the context on this thread and verify it is still the one we retained; returns the
    /// (possibly new) generation. Public so callers can measure or pre-bind; every gpuhost call
    /// does it itself.
    ///
    /// The usual case, one driver call, is inlined into the caller (every launch enters); the
    /// rest (binding, verifying, recovering) is a call of its own.
    #[inline]
    pub fn enter(&self) -> Result<u64> {
        if self.hot.has_ctx_id {
            // Fast path, one driver call: the id of the context current on this thread (NULL
            // asks for the current one; ids are unique for the life of the process) is the one
            // we retained — bound and verified at once, as the path below would find it.
            let generation = self.hot.generation.load(Acquire);
            let expected = self.hot.ctx_id.load(Acquire);
            // SAFETY: null asks for the current context; with none current the driver answers
            // an error code, and we take the full path.
            let id = unsafe { result::ctx::id(ptr::null_mut()) };
            if id == Ok(expected) && self.hot.generation.load(Acquire) == generation {
                return Ok(generation);
            }
        }
        self.enter_slow()
    }

    /// [`Host::enter`] when the fast path did not answer: bind, verify, recover.
    #[cold]
    #[inline(never)]
    fn enter_slow(&self) -> Result<u64> {
        loop {
            let generation = self.hot.generation.load(Acquire);
            let ctx = self.ctx.load(Acquire);
            let cur = result::ctx::current()?;
            if cur != ctx {
                // SAFETY: binding a (possibly stale) context handle is harmless: the identity
                // check below catches a destroyed one.
                match unsafe { result::ctx::set_current(ctx) } {
                    Err(e) if is_context_gone(e.code) => {
                        self.recover(generation)?;
                        continue;
                    }
                    r => r?,
                }
            }
            if !self.verify(ctx)? {
                self.recover(generation)?;
                continue;
            }
            // A recovery may have completed between our loads; re-check so that a verified new
            // context is never reported with the old generation.
            if self.hot.generation.load(Acquire) == generation {
                return Ok(generation);
            }
        }
    }

    /// Enter, then refuse a handle of an older generation.
    #[inline]
    pub(crate) fn enter_for(&self, handle_generation: u64) -> Result<u64> {
        let generation = self.enter()?;
        if generation != handle_generation {
            return Err(Error::ContextLost { generation });
        }
        Ok(generation)
    }

    /// Is `ctx` still the context we retained?
    fn verify(&self, ctx: CUcontext) -> Result<bool> {
        if self.hot.has_ctx_id {
            // SAFETY: a stale ctx yields an error code, not UB.
            return match unsafe { result::ctx::id(ctx) } {
                Ok(id) => Ok(id == self.hot.ctx_id.load(Acquire)),
                Err(e) if is_context_gone(e.code) => Ok(false),
                Err(e) => Err(e.into()),
            };
        }
        self.primary_active()
    }

    /// The result of a driver call made on this host, as gpuhost's: the one place where a
    /// failed call's context is checked (see [`Host::classify`]).
    pub(crate) fn check<T>(&self, r: DriverResult<T>) -> Result<T> {
        r.map_err(|e| self.classify(e))
    }

    /// [`Host::check`] for a call made with handles of `generation`: a driver error after that
    /// generation ended (another thread may have seen the loss first) is ContextLost.
    pub(crate) fn check_at<T>(&self, r: DriverResult<T>, generation: u64) -> Result<T> {
        r.map_err(|e| self.classify_at(e, generation))
    }

    /// The failed call `e`, made with handles of `generation`, as [`Host::check_at`] reports it.
    pub(crate) fn classify_at(&self, e: DriverError, generation: u64) -> Error {
        match self.classify(e) {
            Error::Driver { .. } if self.generation() != generation => Error::ContextLost {
                generation: self.generation(),
            },
            e => e,
        }
    }

    /// A failed call made on this host as gpuhost's error: context-gone results trigger the
    /// identity check (and recovery) and become ContextLost when the context really changed;
    /// otherwise as `From<DriverError>` (sticky results poison the device).
    pub(crate) fn classify(&self, e: DriverError) -> Error {
        match self.loss_behind(e) {
            Ok(Some(generation)) => Error::ContextLost { generation },
            Ok(None) => e.into(),
            Err(other) => other,
        }
    }

    /// The new generation when the context was lost behind the failed call `e`.
    fn loss_behind(&self, e: DriverError) -> Result<Option<u64>> {
        if is_context_gone(e.code) {
            let seen = self.generation();
            self.enter()?;
            // A driver whose stale handles still answer cuCtxGetId: the device's primary
            // context state is the second witness.
            if self.generation() == seen && !self.primary_active()? {
                self.recover(seen)?;
            }
            let generation = self.enter()?;
            return Ok((generation != seen).then_some(generation));
        }
        if !is_sticky(e.code) {
            // A call racing a foreign reset fails with whatever the driver says of the handles
            // that just died (INVALID_HANDLE for a stream, INVALID_VALUE for an address): when
            // the context is gone, that loss is the cause to report.
            let seen = self.generation();
            if let Ok(generation) = self.enter()
                && generation != seen
            {
                return Ok(Some(generation));
            }
        }
        Ok(None)
    }

    fn primary_active(&self) -> Result<bool> {
        // dev came from cuDeviceGet.
        Ok(result::ctx::primary_active(self.dev)?)
    }

    /// Re-retain after the context behind `seen_generation` was lost.
    fn recover(&self, seen_generation: u64) -> Result<()> {
        let _guard = self.recovery.lock().unwrap_or_else(|p| p.into_inner());
        if self.hot.generation.load(Acquire) != seen_generation {
            return Ok(()); // another thread already recovered
        }
        self.drop_surviving_retain()?;
        // SAFETY: the old retain is gone (died with the context, or dropped just above), so this
        // is again exactly one retain held by the host.
        let ctx = unsafe { result::ctx::primary_retain(self.dev) }?;
        // SAFETY: ctx was just retained.
        unsafe { result::ctx::set_current(ctx) }?;
        let id = if self.hot.has_ctx_id {
            read_ctx_id(ctx)?
        } else {
            0
        };
        // Pooled handles belonged to the dead context; their values may be reused by the new
        // one, so they are forgotten, never destroyed.
        for pool in [
            &self.streams,
            &self.draining,
            &self.events,
            &self.timing_events,
        ] {
            let mut p = pool.lock().unwrap_or_else(|p| p.into_inner());
            let n = p.len() as u64;
            p.clear();
            let c = if std::ptr::eq(pool, &self.streams) || std::ptr::eq(pool, &self.draining) {
                &self.counters.live_streams
            } else {
                &self.counters.live_events
            };
            c.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
        }
        // Pooled page-locked regions are our own memory: the dead context took their
        // registrations; free them.
        self.pinned.free_dead();
        self.ctx.store(ctx, Release);
        self.hot.ctx_id.store(id, Release);
        let generation = seen_generation + 1;
        self.hot.generation.store(generation, Release);
        Counters::inc(&self.counters.context_losses);
        tracing::warn!(
            ordinal = self.ordinal,
            generation,
            "primary context was lost; re-retained"
        );
        Ok(())
    }

    /// Before re-retaining after a loss: make sure the host's old retain is not still counted.
    ///
    /// An extra release took it (count zero), but NVIDIA documents that a reset "does not
    /// release" the primary context: the count survives while the context is destroyed. While
    /// the context is inactive, one release drops ours if it survived; if none is left the
    /// driver answers INVALID_CONTEXT and nothing changes. When someone else has already
    /// re-created the context (active), whether our retain survived cannot be told apart, so
    /// nothing is released: at worst one retain too many is held, never one too few.
    fn drop_surviving_retain(&self) -> Result<()> {
        if self.primary_active()? {
            tracing::warn!(
                ordinal = self.ordinal,
                "primary context already re-created by another party; re-retaining without release"
            );
            return Ok(());
        }
        // SAFETY: the primary context is inactive: releasing can only drop a count, never
        // destroy a live context.
        match unsafe { result::ctx::primary_release(self.dev) } {
            Ok(()) => {
                tracing::debug!(
                    ordinal = self.ordinal,
                    "dropped a retain that survived a reset"
                )
            }
            Err(e) if e.is(CUresult::CUDA_ERROR_INVALID_CONTEXT) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    /// Run a handle-free operation (allocating, loading, creating), once more if it met a
    /// context loss: the host has recovered by then, and the caller holds nothing of the old
    /// generation. (Covers drivers whose stale context still answers cuCtxGetId, where the loss
    /// only shows on the next real call.)
    pub(crate) fn fresh<T>(&self, f: impl Fn() -> Result<T>) -> Result<T> {
        match f() {
            Err(Error::ContextLost { .. }) => f(),
            r => r,
        }
    }

    /// A stream from the host's pool (returned to it on drop).
    pub fn stream(self: &Arc<Self>) -> Result<Stream> {
        self.fresh(|| self.stream_once())
    }

    /// A pooled stream of context `generation`; ContextLost once that generation is gone.
    pub(crate) fn stream_in(self: &Arc<Self>, generation: u64) -> Result<Stream> {
        let s = self.stream_once()?;
        if s.generation() != generation {
            return Err(Error::ContextLost {
                generation: self.generation(),
            });
        }
        Ok(s)
    }

    fn stream_once(self: &Arc<Self>) -> Result<Stream> {
        let generation = self.enter()?;
        self.pool_idle_draining(generation);
        let raw = match take_pooled(&self.streams, generation) {
            Some(s) => s as CUstream,
            None => {
                // SAFETY: context bound by enter(); the stream is pooled by the host.
                let s = self.check(unsafe { result::stream::create_non_blocking() })?;
                Counters::inc(&self.counters.live_streams);
                s
            }
        };
        Ok(Stream::new(self.clone(), raw, generation))
    }

    /// Takes back a dropped stream: pooled when idle (`settled`: its owner saw all its work
    /// complete, so the driver is not asked), else kept aside until it is (a stream
    /// still running a kernel handed to the next user would make that user's work queue behind
    /// it, for as long as the kernel runs). Stale generations are forgotten.
    pub(crate) fn return_stream(&self, generation: u64, raw: CUstream, settled: bool) {
        let current = self.generation();
        if generation != current {
            Counters::dec(&self.counters.live_streams);
            return;
        }
        if settled || self.stream_idle(generation, raw) {
            give_pooled(&self.streams, generation, raw as usize, current);
        } else {
            give_pooled(&self.draining, generation, raw as usize, current);
        }
    }

    /// True when `raw` (of `generation`) has no work queued or running. Any failure (a lost or
    /// poisoned context) counts as busy: such a stream is never handed out again.
    fn stream_idle(&self, generation: u64, raw: CUstream) -> bool {
        if self.enter_for(generation).is_err() {
            return false;
        }
        Counters::inc(&self.counters.stream_idle_queries);
        // SAFETY: a stream of the bound, current-generation context, not destroyed (pooled or
        // draining streams are only forgotten, never destroyed, while their generation lives).
        unsafe { result::stream::query(raw) }.is_ok()
    }

    /// Moves the draining streams of `generation` that have gone idle into the pool.
    fn pool_idle_draining(&self, generation: u64) {
        let mut d = self.draining.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_empty() {
            return;
        }
        let mut idle = Vec::new();
        d.retain(|&(g, raw)| {
            if g != generation {
                // Of a dead context (pushed while it was being replaced): forgotten.
                Counters::dec(&self.counters.live_streams);
                return false;
            }
            let busy = !self.stream_idle(g, raw as CUstream);
            if !busy {
                idle.push(raw);
            }
            busy
        });
        drop(d);
        for raw in idle {
            give_pooled(&self.streams, generation, raw, self.generation());
        }
    }

    /// A pooled event (timing disabled, for completion tracking, or timing enabled).
    pub(crate) fn event(&self, generation: u64, timing: bool) -> Result<CUevent> {
        let pool = if timing {
            &self.timing_events
        } else {
            &self.events
        };
        if let Some(e) = take_pooled(pool, generation) {
            return Ok(e as CUevent);
        }
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT as u32
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        };
        // SAFETY: the caller has entered the host; the event is pooled by the host.
        let e = self.check(unsafe { result::stream::event_create(flags) })?;
        Counters::inc(&self.counters.live_events);
        Ok(e)
    }

    pub(crate) fn return_event(&self, generation: u64, raw: CUevent, timing: bool) {
        let pool = if timing {
            &self.timing_events
        } else {
            &self.events
        };
        give_pooled(pool, generation, raw as usize, self.generation());
        if generation != self.generation() {
            Counters::dec(&self.counters.live_events);
        }
    }

    /// Allocate `bytes` of device memory (contents unspecified). A block that an earlier buffer
    /// of the same size class left is reused without a driver call (see
    /// [`Host::set_alloc_cache_limit`]).
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<DeviceBuffer> {
        self.fresh(|| DeviceBuffer::alloc(self, bytes))
    }

    /// Keep at most `bytes` of freed allocations for reuse ([`DEFAULT_ALLOC_CACHE_LIMIT`] unless
    /// set; 0 turns reuse off and frees what is kept). Sizes are rounded up to a class (powers of
    /// two to 2 MiB, then multiples of 2 MiB) while reuse is on. An allocation that finds the
    /// device full frees the kept blocks and tries again, so they never cause an out-of-memory.
    ///
    /// [`DEFAULT_ALLOC_CACHE_LIMIT`]: crate::DEFAULT_ALLOC_CACHE_LIMIT
    pub fn set_alloc_cache_limit(&self, bytes: usize) {
        self.alloc_cache.set_limit(bytes);
        if bytes == 0 {
            self.trim_alloc_cache();
        }
    }

    /// Frees every kept allocation (the device's free memory then counts them again); returns
    /// how many there were.
    pub fn trim_alloc_cache(&self) -> usize {
        self.trim_alloc_cache_in(self.generation())
    }

    pub(crate) fn trim_alloc_cache_in(&self, generation: u64) -> usize {
        let blocks = self.alloc_cache.drain(generation);
        let n = blocks.len();
        // A kept block is ours, of this generation, and used by nothing (it came back when its
        // buffer's last holder and launch were gone).
        self.release_in(generation, "free kept allocations", || {
            self.device_alloc.free(self, generation, &blocks)
        });
        n
    }

    /// Free and total device memory.
    pub fn mem_info(&self) -> Result<MemInfo> {
        self.fresh(|| self.mem_info_once())
    }

    fn mem_info_once(&self) -> Result<MemInfo> {
        self.enter()?;
        // Context bound by enter().
        let (free, total) = self.check(result::mem::info())?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    /// Block until all work in the context is done.
    pub fn synchronize(&self) -> Result<()> {
        self.enter()?;
        // Context bound by enter().
        self.check(result::ctx::synchronize())
    }

    /// For Drop implementations: binds the context and runs `release` if `generation` is still
    /// current. Handles of a dead generation died with their context, and their values may be
    /// reused by the new one, so they are forgotten; any other failure is recorded as `what`.
    pub(crate) fn release_in(&self, generation: u64, what: &str, release: impl FnOnce()) {
        match self.enter_for(generation) {
            Ok(_) => release(),
            Err(Error::ContextLost { .. }) => {}
            Err(e) => self.drop_error(&format!("binding the context to {what}"), &e),
        }
    }

    /// Record an error from a Drop implementation (which must not panic).
    pub(crate) fn drop_error(&self, what: &str, e: &Error) {
        Counters::inc(&self.counters.drop_errors);
        tracing::warn!(ordinal = self.ordinal, "{what}: {e}");
    }
}

fn read_ctx_id(ctx: CUcontext) -> Result<u64> {
    // SAFETY: ctx is a live retained context.
    Ok(unsafe { result::ctx::id(ctx) }?)
}

fn take_pooled(pool: &Mutex<Vec<(u64, usize)>>, generation: u64) -> Option<usize> {
    let mut p = pool.lock().unwrap_or_else(|p| p.into_inner());
    while let Some((g, h)) = p.pop() {
        if g == generation {
            return Some(h);
        }
    }
    None
}

fn give_pooled(pool: &Mutex<Vec<(u64, usize)>>, generation: u64, raw: usize, current: u64) {
    if generation == current {
        pool.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((generation, raw));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_and_launch_limits_every_launch_reads_fill_one_cache_line_of_their_own() {
        // A field added to `Hot` past the line, or the alignment lost, puts the launch path
        // back on two lines (or beside fields other threads write).
        assert_eq!(std::mem::align_of::<Hot>(), 64);
        assert_eq!(std::mem::size_of::<Hot>(), 64);
        assert_eq!(std::mem::offset_of!(Host, hot) % 64, 0);
    }
}
