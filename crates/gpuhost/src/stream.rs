//! Streams (pooled per host) and the launch path: checks, cuLaunchKernel, and queueing of the
//! launch until some thread records an event covering it (see completion.rs for who does, when).

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys::{CUevent, CUstream};

use crate::buffer::DeviceBuffer;
use crate::completion::{self, Batch, Completion, Flush, Launched};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::launch::{Arg, INLINE_ARGS, LaunchConfig, PackedArgs, lay_out, pack};
use crate::pinned::Pinned;
use crate::registry::Kernel;
use crate::result::{self, DriverError};

/// The launching thread records an event itself after this many unrecorded launches, bounding
/// the queue of a stream that is never idle and whose completions are dropped.
const FLUSH_EVERY: usize = 256;

/// A non-blocking stream from the host's pool; it returns to the pool on drop (once idle).
pub struct Stream {
    host: Arc<Host>,
    raw: CUstream,
    generation: u64,
    /// Launches whose completion event is not recorded yet (shared with their Completions and
    /// the completion thread).
    unrecorded: Arc<Unrecorded>,
    /// 1 + the launches ever queued when its owner last saw everything it enqueued complete
    /// ([`Stream::mark_settled`]); 0 before. Dropped with no launch queued since, it is pooled
    /// without asking the driver whether it is idle.
    settled_at: AtomicU64,
}

struct Unrecorded {
    /// This queue, for the batches it opens (each batch's outcome slot holds its stream).
    me: Weak<Unrecorded>,
    host: Arc<Host>,
    raw: CUstream,
    generation: u64,
    /// The open batch: launches since the last recorded event, sharing one outcome slot.
    launches: Mutex<Launched>,
    /// launches.len(), readable without the lock (written under it; see `push` for orderings).
    queued: AtomicUsize,
    /// Launches ever queued (written under the lock): the completion thread's idleness probe.
    pushed: AtomicU64,
    /// Watched by the completion thread (see completion::watch).
    watched: AtomicBool,
}

// SAFETY: a CUstream may be used from any thread with its context bound, which every method
// ensures through Host::enter.
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises work submitted to one stream.
unsafe impl Sync for Stream {}
// SAFETY: as for Stream; the launch list is behind a mutex.
unsafe impl Send for Unrecorded {}
// SAFETY: as above.
unsafe impl Sync for Unrecorded {}

impl Flush for Unrecorded {
    fn flush(&self) {
        if let Some(launches) = self.take() {
            self.record_after(launches);
        }
    }

    fn sync_point(&self) -> Result<()> {
        let generation = match self.host.enter_for(self.generation) {
            Ok(g) => g,
            Err(e) => {
                if let Some(launches) = self.take() {
                    completion::complete(&self.host, launches, &Err(e.clone()));
                }
                return Err(e);
            }
        };
        let launches = self.take();
        let res = record_on(&self.host, self.raw, generation, false).and_then(|event| {
            // SAFETY: event just recorded in the bound, current-generation context.
            let r = unsafe { result::stream::event_synchronize(event) };
            let res = self.host.check(r);
            if res.is_ok() {
                self.host.return_event(generation, event, false);
            }
            res
        });
        if let Some(launches) = launches {
            completion::complete(&self.host, launches, &res);
        }
        res
    }

    fn activity(&self) -> (usize, u64) {
        (
            self.queued.load(Ordering::SeqCst),
            self.pushed.load(Ordering::Relaxed),
        )
    }

    fn watched(&self) -> &AtomicBool {
        &self.watched
    }

    fn await_spin(&self) -> std::time::Duration {
        self.host.await_spin()
    }

    fn host(&self) -> Option<&Arc<Host>> {
        Some(&self.host)
    }

    fn record_kept(&self) -> Option<Batch> {
        self.take().and_then(|launches| self.close(launches))
    }
}

impl Unrecorded {
    /// Take the open batch (None when empty), marking it recorded (the caller records an event
    /// next); later launches start a new batch.
    fn take(&self) -> Option<Launched> {
        // Launches that happen-before this call have stored `queued` (under the lock).
        if self.queued.load(Ordering::SeqCst) == 0 {
            return None;
        }
        // Allocated before locking: a launching thread may be waiting for the lock.
        let fresh = Launched::new(self.me.upgrade().map(|s| s as Arc<dyn Flush>));
        let launches = {
            let mut l = self.launches.lock().unwrap_or_else(|p| p.into_inner());
            if l.len() == 0 {
                return None;
            }
            self.queued.store(0, Ordering::SeqCst);
            std::mem::replace(&mut *l, fresh)
        };
        launches.recorded();
        Some(launches)
    }

    /// Record an event after `launches` (taken from the queue before, so each was issued before
    /// the event) and hand them to the completion thread; a failure completes them with it.
    fn record_after(&self, launches: Launched) {
        if let Some(batch) = self.close(launches) {
            completion::hand_over(&self.host, batch);
        }
    }

    /// `launches` closed by an event recorded now, on this thread (which it leaves bound to
    /// the context); None when recording failed, the launches then completed with the error.
    fn close(&self, launches: Launched) -> Option<Batch> {
        let recorded = self
            .host
            .enter_for(self.generation)
            .and_then(|g| record_on(&self.host, self.raw, g, false).map(|e| (g, e)));
        match recorded {
            Ok((generation, event)) => Some(Batch {
                event,
                generation,
                launches,
            }),
            Err(e) => {
                completion::complete(&self.host, launches, &Err(e));
                None
            }
        }
    }

    /// Add a launch just issued to the open batch; returns its Completion, the batch size and
    /// whether this launch opened the batch.
    #[inline]
    fn push(&self, kernel: &Kernel, args: &[Arg<'_>]) -> (Completion, usize, bool) {
        let mut l = self.launches.lock().unwrap_or_else(|p| p.into_inner());
        let opened = l.len() == 0;
        let completion = l.add(kernel, args);
        self.pushed_locked(&l, opened, completion)
    }

    /// Add a graph replay of `n` launches just issued to the open batch (see
    /// `Launched::add_graph`); returns as [`Unrecorded::push`] does.
    fn push_graph(
        &self,
        kernels: &[Kernel],
        buffers: impl IntoIterator<Item = DeviceBuffer>,
        n: usize,
    ) -> (Completion, usize, bool) {
        let mut l = self.launches.lock().unwrap_or_else(|p| p.into_inner());
        let opened = l.len() == 0;
        let completion = l.add_graph(kernels, buffers, n);
        self.pushed_locked(&l, opened, completion)
    }

    /// After a push into `l` (locked; `opened`: it was empty before): publish the new size.
    #[inline]
    fn pushed_locked(
        &self,
        l: &Launched,
        opened: bool,
        completion: Completion,
    ) -> (Completion, usize, bool) {
        let n = l.len();
        self.pushed
            .store(self.pushed.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // Only a batch's first push turns `queued` from 0 (what `take`'s lock-free look and
        // the completion thread's unwatching test for): it stays SeqCst, pairing with the
        // unwatching (see completion::flush_idle_streams). A later push's count is non-zero
        // whichever value a reader sees, so it needs no full fence.
        let order = if opened {
            Ordering::SeqCst
        } else {
            Ordering::Release
        };
        self.queued.store(n, order);
        (completion, n, opened)
    }
}

/// Record a pooled event on `raw` (the caller has entered the host at `generation`).
fn record_on(host: &Host, raw: CUstream, generation: u64, timing: bool) -> Result<CUevent> {
    let event = host.event(generation, timing)?;
    // SAFETY: event and stream belong to the bound, current-generation context.
    let r = unsafe { result::stream::record(event, raw) };
    if let Err(e) = host.check(r) {
        host.return_event(generation, event, timing);
        return Err(e);
    }
    Ok(event)
}

impl Stream {
    pub(crate) fn new(host: Arc<Host>, raw: CUstream, generation: u64) -> Self {
        let unrecorded = Arc::new_cyclic(|me| Unrecorded {
            me: me.clone(),
            host: host.clone(),
            raw,
            generation,
            launches: Mutex::new(Launched::new(None)),
            queued: AtomicUsize::new(0),
            pushed: AtomicU64::new(0),
            watched: AtomicBool::new(false),
        });
        // The first batch holds its stream, as `take` gives every later one (possible only
        // once the Arc exists).
        *unrecorded
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Launched::new(Some(unrecorded.clone()));
        Self {
            unrecorded,
            host,
            raw,
            generation,
            settled_at: AtomicU64::new(0),
        }
    }

    /// Says that everything enqueued on this stream has completed (the caller saw it all
    /// complete): when dropped with no launch since, the stream goes back to the host's pool
    /// without a cuStreamQuery. A launch after this makes the drop ask the driver after all;
    /// other work (copies, event waits, work of other libraries on [`Stream::raw`]) is the
    /// caller's to have seen complete. A wrong claim never breaks memory safety: the next user
    /// of the stream finds its work queued behind what still runs.
    pub fn mark_settled(&self) {
        let pushed = self.unrecorded.pushed.load(Ordering::Acquire);
        self.settled_at.store(pushed + 1, Ordering::Release);
    }

    /// The host this stream belongs to.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The context generation of this stream.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The raw stream (for interop and benchmarks).
    pub fn raw(&self) -> CUstream {
        self.raw
    }

    /// A buffer used on this stream must be of its device and of its context generation.
    pub(crate) fn check_buffer(&self, what: &'static str, b: &DeviceBuffer) -> Result<()> {
        if !Arc::ptr_eq(&b.inner.host, &self.host) {
            return Err(Error::DeviceMismatch {
                what,
                expected: self.host.ordinal(),
                found: b.device(),
            });
        }
        if b.generation() != self.generation {
            return Err(Error::ContextLost {
                generation: self.host.generation(),
            });
        }
        Ok(())
    }

    /// The checks every launch on this stream passes before it reaches the driver (kernel and
    /// buffers of this device and generation, geometry within the device's limits, arguments
    /// matching the parameters), and the arguments packed for the driver.
    #[inline]
    pub(crate) fn prepare(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<PackedArgs> {
        if !Arc::ptr_eq(kernel.host(), &self.host) {
            return Err(Error::DeviceMismatch {
                what: "kernel",
                expected: self.host.ordinal(),
                found: kernel.host().ordinal(),
            });
        }
        for a in args {
            if let Arg::Buffer(b, _) = a {
                self.check_buffer("buffer argument", b)?;
                // Before the driver call, so an arena allocation made meanwhile on another
                // thread is zeroed (arena.rs); a launch refused below only costs a zeroing.
                b.note_kernel();
            }
        }
        cfg.check(kernel.name(), self.host.facts())?;
        let packed = pack(kernel.name(), kernel.params(), args)?;
        debug_assert_eq!(packed.len(), kernel.params().len());
        Ok(packed)
    }

    /// Queue a launch of `kernel` with `args`, just issued, for completion (what
    /// [`Stream::launch`] does after cuLaunchKernel). Inlined there: a call of its own saved and
    /// restored registers around a few dozen instructions.
    #[inline]
    pub(crate) fn issued(&self, kernel: &Kernel, args: &[Arg<'_>]) -> Completion {
        completion::count_launch(&self.host);
        // The batch takes its registry guard after the launch: `kernel` is borrowed for this
        // whole call, so release refuses (naming it) until then.
        let (completion, n, opened) = self.unrecorded.push(kernel, args);
        self.after_push(n, opened);
        completion
    }

    /// After a push made the open batch `n` launches long (`opened`: it opened the batch):
    /// records an event every FLUSH_EVERY launches, and has the completion thread watch a
    /// batch just opened.
    #[inline]
    fn after_push(&self, n: usize, opened: bool) {
        if n >= FLUSH_EVERY {
            self.flush_full();
        } else if opened {
            completion::watch(&self.host, &self.unrecorded);
        }
    }

    /// The flush of a batch FLUSH_EVERY launches long: a call of its own, so that the launch
    /// path does not carry its frame (inlined, it was a 0x228-byte frame on every launch).
    #[cold]
    #[inline(never)]
    fn flush_full(&self) {
        self.unrecorded.flush();
    }

    /// Queue a graph replay of `n` launches of `kernels` using `buffers`, just issued, for
    /// completion, as one Completion (what [`Stream::replay_graph`] does after cuGraphLaunch).
    pub(crate) fn issued_graph(
        &self,
        kernels: &[Kernel],
        buffers: impl IntoIterator<Item = DeviceBuffer>,
        n: usize,
    ) -> Completion {
        completion::count_launches(&self.host, n);
        let (completion, queued, opened) = self.unrecorded.push_graph(kernels, buffers, n);
        self.after_push(queued, opened);
        completion
    }

    /// Enqueue `kernel` with `args` and return at once; the returned Completion resolves when
    /// the GPU has finished it. Arguments, dimensions, devices and generations are checked first.
    pub fn launch(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<Completion> {
        if args.len() <= INLINE_ARGS {
            // The argument slots live in this frame until the driver has copied them.
            let mut scalars = [0u64; INLINE_ARGS];
            let mut pointers = [ptr::null_mut::<c_void>(); INLINE_ARGS];
            self.launch_in(kernel, cfg, args, &mut scalars, &mut pointers)
        } else {
            self.launch_long(kernel, cfg, args)
        }
    }

    /// [`Stream::launch`] of more arguments than fit its inline slots.
    #[cold]
    #[inline(never)]
    fn launch_long(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<Completion> {
        let mut scalars = vec![0u64; args.len()];
        let mut pointers = vec![ptr::null_mut::<c_void>(); args.len()];
        self.launch_in(kernel, cfg, args, &mut scalars, &mut pointers)
    }

    /// The launch, its arguments laid out in `scalars` and `pointers` (at least one slot per
    /// argument each, kept in place by the caller until this returns).
    #[inline(always)]
    fn launch_in(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
        scalars: &mut [u64],
        pointers: &mut [*mut c_void],
    ) -> Result<Completion> {
        if !lay_out(
            &self.host,
            self.generation,
            kernel,
            &cfg,
            args,
            scalars,
            pointers,
        ) {
            return self.launch_prepared(kernel, cfg, args);
        }
        // SAFETY: lay_out accepted the launch, so `pointers` holds one pointer per parameter,
        // each to a value of the parameter's size (in `scalars` or the caller's bytes), and the
        // caller keeps both in place for this call.
        unsafe { self.launch_raw(kernel, cfg, args, pointers.as_mut_ptr()) }
    }

    /// A launch the one-pass check refused: `prepare`, the reference, says why (and were it to
    /// accept what that check refused, its packing is launched: the two differ only in speed).
    /// A call of its own, so that the launch path carries neither its frame nor its packing.
    #[cold]
    #[inline(never)]
    fn launch_prepared(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<Completion> {
        let mut packed = self.prepare(kernel, cfg, args)?;
        // SAFETY: prepare checked the arguments against the parameters and packed one pointer
        // per parameter, each to a value of its size; `packed` lives until this returns.
        unsafe { self.launch_raw(kernel, cfg, args, packed.as_params()) }
    }

    /// Enter, refuse a kernel of an older generation, cuLaunchKernel, queue the launch.
    ///
    /// # Safety
    /// `params` holds exactly one pointer per parameter of `kernel`, each to a value of the
    /// parameter's size, all alive until this returns (the driver copies them at launch).
    #[inline(always)]
    unsafe fn launch_raw(
        &self,
        kernel: &Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
        params: *mut *mut c_void,
    ) -> Result<Completion> {
        let generation = self.host.enter_for(self.generation)?;
        if kernel.generation() != generation {
            return Err(Error::ContextLost { generation });
        }
        // SAFETY: the context is bound and current-generation; the function belongs to it
        // (generation checked); params as the caller promises (above).
        let r = unsafe {
            result::stream::launch(
                kernel.raw(),
                cfg.grid,
                cfg.block,
                cfg.shared_mem_bytes,
                self.raw,
                params,
            )
        };
        if let Err(e) = r {
            return Err(self.refused(kernel, &cfg, e, generation));
        }
        Ok(self.issued(kernel, args))
    }

    /// The error of a launch the driver refused: the kernel's own limit where one explains it
    /// (launch/refusal.rs), else the driver's code as every call's failure is reported.
    #[cold]
    #[inline(never)]
    fn refused(
        &self,
        kernel: &Kernel,
        cfg: &LaunchConfig,
        e: DriverError,
        generation: u64,
    ) -> Error {
        crate::launch::kernel_limit(kernel, cfg, e)
            .unwrap_or_else(|| self.host.classify_at(e, generation))
    }

    /// A Completion for everything enqueued on this stream so far — launches, event waits,
    /// work of other libraries on the raw stream — that resolves when the stream reaches this
    /// point: `.await` it to synchronize without blocking the thread. No kernel is launched; the
    /// open batch of launches is closed with one event, as a poll of its Completion would.
    pub fn fence(&self) -> Result<Completion> {
        self.fence_keeping(&[], None)
    }

    /// [`Stream::fence`], its batch also keeping `buffers` and `staging` alive until reached.
    pub(crate) fn fence_keeping(
        &self,
        buffers: &[&DeviceBuffer],
        staging: Option<Arc<Pinned>>,
    ) -> Result<Completion> {
        // A lost context is this call's error, not only its Completion's.
        if let Err(e) = self.host.enter_for(self.generation) {
            // A copy on the chunk may have been enqueued and not run yet: keep it out of use.
            if let Some(s) = &staging {
                s.mark_unknown();
            }
            return Err(e);
        }
        let mut launches = self.unrecorded.take().unwrap_or_else(|| {
            let empty = Launched::new(Some(self.unrecorded.clone()));
            empty.recorded();
            empty
        });
        launches.keep(buffers, staging);
        let fence = launches.completion();
        self.unrecorded.record_after(launches);
        Ok(fence)
    }

    /// Block until everything enqueued on this stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.host.enter_for(self.generation)?;
        // SAFETY: stream of the bound, current-generation context.
        let r = unsafe { result::stream::synchronize(self.raw) };
        self.host.check(r)
    }

    /// Record a timing event at this point of the stream.
    pub fn record(&self) -> Result<Event> {
        let generation = self.host.enter_for(self.generation)?;
        let raw = record_on(&self.host, self.raw, generation, true)?;
        Ok(Event {
            host: self.host.clone(),
            raw,
            generation,
        })
    }

    /// Make later work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        if !Arc::ptr_eq(&event.host, &self.host) {
            return Err(Error::DeviceMismatch {
                what: "event",
                expected: self.host.ordinal(),
                found: event.host.ordinal(),
            });
        }
        let generation = self.host.enter_for(self.generation)?;
        if event.generation != generation {
            return Err(Error::ContextLost { generation });
        }
        // SAFETY: both handles belong to the bound, current-generation context.
        let r = unsafe { result::stream::wait_event(self.raw, event.raw) };
        self.host.check(r)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Settled, and no launch queued since: idle without asking the driver (a `gpuhost
        // serve` request's stream, whose guest read its result after its launch).
        let settled = self.settled_at.load(Ordering::Acquire)
            == self.unrecorded.pushed.load(Ordering::Acquire) + 1;
        // Nothing may launch on this stream any more: record its last event now rather than
        // leaving its launches (and what they keep alive) to the completion thread's idle flush.
        self.unrecorded.flush();
        // The open (empty) batch's outcome slot holds the queue, which holds the batch: a cycle
        // until replaced by one without a stream (nothing joins it: nothing launches any more).
        *self
            .unrecorded
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Launched::new(None);
        self.host.return_stream(self.generation, self.raw, settled);
    }
}

/// A timing event recorded on a stream (pooled; returns to the pool on drop).
pub struct Event {
    host: Arc<Host>,
    raw: CUevent,
    generation: u64,
}

// SAFETY: a CUevent may be used from any thread with its context bound (every method binds it).
unsafe impl Send for Event {}
// SAFETY: as above; event queries are thread-safe in the driver.
unsafe impl Sync for Event {}

impl Event {
    /// Block until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.host.enter_for(self.generation)?;
        // SAFETY: event of the bound, current-generation context.
        let r = unsafe { result::stream::event_synchronize(self.raw) };
        self.host.check(r)
    }

    /// Milliseconds between two completed events of one host.
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        if !Arc::ptr_eq(&start.host, &end.host) {
            return Err(Error::DeviceMismatch {
                what: "event",
                expected: start.host.ordinal(),
                found: end.host.ordinal(),
            });
        }
        let generation = start.host.enter_for(start.generation)?;
        if end.generation != generation {
            return Err(Error::ContextLost { generation });
        }
        // SAFETY: both events are timing events of the bound context.
        let r = unsafe { result::stream::elapsed_ms(start.raw, end.raw) };
        start.host.check(r)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        self.host.return_event(self.generation, self.raw, true);
    }
}
