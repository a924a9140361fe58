//! GPU-time limits of sandboxed guests: one watchdog thread for the process, ticking every
//! millisecond while a sandboxed guest has work on the device and for [`LINGER`] after, asleep
//! otherwise.
//!
//! No CUDA call stops one running kernel; sandboxed kernels instead poll their guest's abort
//! epoch (word 0 of its control block) at entry and on loop back-edges and exit when it differs
//! from the epoch their launch was given. The watchdog bumps a guest's epoch when its work runs
//! past `Limits::max_kernel_time`, or at once when its Store is dropped.
//!
//! The watchdog thread never calls the driver: on NVIDIA a call can wait inside libcuda behind
//! another thread's call that waits for the device, i.e. for the runaway kernel (seen on the
//! H200: launches that grow local memory, module loads, large allocations and frees). Nor does
//! it take a lock that anyone holds across a driver call: a launch reads its epoch and notes
//! itself under its stream's lock, then calls the driver with the lock released, then counts
//! itself under the lock again. (With the launch inside the lock, one guest's launch waiting in
//! the driver for another guest's endless kernel held the watchdog at that stream's lock, so
//! the endless kernel was never stopped: the rare one-thread hang of the red-team flood test on
//! the H200, sessions 9–15.) It stops
//! a guest with a CPU store to its control block (see gpuhost's control_pool.rs), and tells
//! whether launches ended from their `Completion`s, which the launching thread and gpuhost's
//! completion thread record. A guest dropped with nothing in flight leaves its list at once
//! (`StoreWatch::store_dropped`); when the watchdog lets go of the watches of guests dropped with
//! work in flight it wakes the sandbox pools' resetter thread (a condvar, pool/resetter.rs),
//! whose pairs those watches held.
//!
//! Launches are watched in segments: every [`FENCE_EVERY`] launches, or when launching pauses
//! for a tick, the open launches close into one whose end is the end of its last launch. Each
//! launch may run `max_kernel_time` from when it starts on the device (below). When a guest is
//! stopped, every stream of it with work in flight reports `time-limit` at its next
//! `synchronize`, naming the kernel(s) of the segment that ran over.
//!
//! **When a launch starts.** Reaching the front of its stream (its predecessors done) is not
//! starting: another guest's kernels may hold every SM, and the launch then waits for them,
//! however long they run. Counted from the front, a guest that fills the device until its own
//! limit got the launches of others queued behind it stopped (their limit passed while they
//! waited). So each stream has a start counter in its guest's control block: every launch's
//! first thread adds 1 to the counter (`ptxvm::sandbox::CTL_STARTED`, on the device) and stores
//! the GPU's clock in its time word (`CTL_STARTED_AT`, in host memory), except a launch of a
//! skip copy that never polls (`KernelSandbox::starts` counts it as nothing): it runs a
//! bounded straight path, so it can neither run long nor be stopped. The watchdog reads the
//! time word when a segment becomes the front and at every tick after; a change says one of
//! the segment's launches (the next, in stream order) began since the last tick, and the time
//! runs from that tick, a launch's limit at a time. What the time word cannot say is whether
//! the segment's first launch began before the segment became the front (in the same tick as
//! its predecessor ended), so a segment seen to change nothing is charged from when it became
//! the front, and before it is stopped the watchdog reads the counter, which says whether any
//! of its launches began (`ControlBlock::issue_starts` counts those issued): none, and its time
//! starts again. That read moves the control block's page off the device (as a stop's store
//! does), once per launch past its limit. A launch is therefore never stopped before it has run
//! its limit, and a runaway one is stopped within a tick or two of it. A stream given no
//! counter of its own (a guest with more streams than counters) is watched as before session
//! 44: a segment of `n` launches may run `n × max_kernel_time` from reaching the front.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use gpuhost::{Completion, CompletionObserver, ControlBlock};

use crate::burst::Flushed;
use crate::stream::InFlight;

/// The watchdog's period.
pub(crate) const TICK: Duration = Duration::from_millis(1);
/// How long the watchdog keeps ticking after the last work it watched ended, before it sleeps
/// until woken: under steady load (a `gpuhost serve` request's launch every few hundred µs)
/// the next launch then finds it awake and wakes nobody, where a sleeping watchdog cost each
/// request's first launch a futex wake.
const LINGER: Duration = Duration::from_millis(20);
/// Launches of one stream per segment, at most: a segment of a stream without a start counter
/// of its own may run this many times the limit.
/// Also the most launches a sandboxed guest's graph batch holds (burst/).
pub(crate) const FENCE_EVERY: u32 = 8;
/// The start counter shared by streams given none of their own: never read.
const UNTRACKED: u32 = 0;
/// Kernel names kept per segment (for the error message).
pub(crate) const NAMES_KEPT: usize = 3;
/// How long [`StoreWatch::drained`] waits for a dropped guest's launches at most. Stopped
/// kernels exit at their next poll, well within it; past it the launches still keep the guest's
/// memory (their anchors), so nothing is reused under them.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// Control block word holding the abort epoch (host-written).
pub(crate) const CTL_EPOCH: usize = ptxvm::sandbox::CTL_EPOCH as usize;
/// Control block word where a kernel stopped mid-loop leaves its launch tag (kernel-written).
pub(crate) const CTL_STOPPED_TAG: usize = ptxvm::sandbox::CTL_STOPPED_TAG as usize;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the state consistent before anything that can panic.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the watchdog knows of one sandboxed guest (Store).
pub(crate) struct StoreWatch {
    ctl: ControlBlock,
    limit: Duration,
    /// The epoch launches are given now (the control block holds the same for the device).
    epoch: AtomicU32,
    stopping: Mutex<()>,
    streams: Mutex<Vec<Arc<StreamWatch>>>,
    /// Start counters no stream of this guest holds (`UNTRACKED` is never one).
    free_counters: Arc<Mutex<Vec<u32>>>,
    /// The Store is gone: its work is being stopped, and the watchdog forgets it once drained.
    dropped: AtomicBool,
    dropped_at: OnceLock<Instant>,
    drained: tokio::sync::Notify,
}

impl StoreWatch {
    /// Watches a guest whose kernels poll `ctl`, with `limit` of GPU time per launch.
    /// The block is fresh, so its epoch is 0.
    pub(crate) fn new(ctl: ControlBlock, limit: Duration) -> Arc<Self> {
        let w = Arc::new(Self {
            ctl,
            limit,
            epoch: AtomicU32::new(0),
            stopping: Mutex::new(()),
            streams: Mutex::new(Vec::new()),
            // Popped from the end: the lowest first.
            free_counters: Arc::new(Mutex::new(
                (UNTRACKED + 1..gpuhost::START_COUNTERS as u32)
                    .rev()
                    .collect(),
            )),
            dropped: AtomicBool::new(false),
            dropped_at: OnceLock::new(),
            drained: tokio::sync::Notify::new(),
        });
        Watchdog::get().add(w.clone());
        w
    }

    pub(crate) fn ctl(&self) -> &ControlBlock {
        &self.ctl
    }

    /// A new stream of this guest, watched, with a start counter of its own while any is free.
    pub(crate) fn stream(&self) -> Arc<StreamWatch> {
        let now = Instant::now();
        let counter = lock(&self.free_counters).pop().unwrap_or(UNTRACKED);
        let w = Arc::new(StreamWatch {
            counter,
            free_counters: self.free_counters.clone(),
            q: Mutex::new(WatchQ {
                open: 0,
                open_first: 0,
                open_last: None,
                open_names: Vec::new(),
                open_since: now,
                segments: VecDeque::new(),
                front_since: now,
                front_mark: 0,
                front_began: None,
                stopped: None,
                launching: None,
            }),
        });
        lock(&self.streams).push(w.clone());
        w
    }

    /// Stops every launch of this guest now running or queued (their kernels exit at their next
    /// poll); each stream with work in flight reports `stopped_by` at its next synchronize.
    fn stop(&self, stopped_by: Option<&[Arc<str>]>) {
        let epoch;
        {
            // Two stops at once (a tick and a Store drop) must leave the newest epoch stored.
            let _one = lock(&self.stopping);
            // Cleared first: the kernels this stop ends write their tag into it.
            self.ctl.store_u32(CTL_STOPPED_TAG, 0);
            // The block's word before the launches' epoch: a launch that reads the new epoch
            // finds its kernels' word already changed, so only launches that read the old one
            // are stopped, and each of those is noted as launching, or counted, below.
            epoch = self.epoch.load(Ordering::SeqCst).wrapping_add(1);
            self.ctl.store_u32(CTL_EPOCH, epoch);
            self.epoch.store(epoch, Ordering::SeqCst);
        }
        let now = Instant::now();
        for s in lock(&self.streams).iter() {
            let mut q = lock(&s.q);
            let stops_launching = q.launching.is_some_and(|e| e != epoch);
            if q.open > 0 || !q.segments.is_empty() || stops_launching {
                s.new_front(&mut q, now, &self.ctl);
                if let Some(names) = stopped_by {
                    q.stopped.get_or_insert_with(|| describe(names));
                }
            }
        }
    }

    /// The Store is being dropped: stop its work; the watchdog keeps what that work uses until
    /// it has ended. [`StoreWatch::drained`] resolves then.
    pub(crate) fn store_dropped(self: &Arc<Self>) {
        self.dropped_at.get_or_init(Instant::now);
        self.dropped.store(true, Ordering::SeqCst);
        // With nothing in flight there is nothing to stop, and leaving the epoch alone keeps
        // its page on the device for the block's next user (a pooled block, in serve). No
        // launch can follow (they need the Store), so the watch leaves the watchdog's list
        // here: waking the watchdog to let go of it, and it the pools' resetter, were two
        // cross-thread wake-ups per `gpuhost serve` request.
        if self.is_idle() {
            Watchdog::get().forget(self);
            self.drained.notify_waiters();
            return;
        }
        self.stop(None);
        Watchdog::get().wake();
    }

    /// Resolves when the dropped Store's launches have all ended, or after [`DRAIN_WAIT`];
    /// returns whether they ended.
    pub(crate) async fn drained(&self) -> bool {
        loop {
            let notified = self.drained.notified();
            if self.is_idle() {
                return true;
            }
            if self.waited_enough(Instant::now()) {
                return false;
            }
            notified.await;
        }
    }

    fn waited_enough(&self, now: Instant) -> bool {
        self.dropped_at
            .get()
            .is_some_and(|t| now.duration_since(*t) >= DRAIN_WAIT)
    }

    fn is_idle(&self) -> bool {
        lock(&self.streams).iter().all(|s| s.is_idle())
    }

    /// One tick: closes idle open segments, retires finished ones, stops the guest if the front
    /// segment of a stream ran past its budget. Returns whether the guest still has work.
    fn tick(&self, now: Instant) -> bool {
        let mut over = None;
        let mut busy = false;
        {
            let mut streams = lock(&self.streams);
            streams.retain(|s| {
                let (work, late) = s.tick(now, self.limit, &self.ctl);
                busy |= work;
                if late.is_some() && over.is_none() {
                    over = late;
                }
                // A stream the guest no longer holds is forgotten once its work has ended.
                work || Arc::strong_count(s) > 1
            });
        }
        if let Some(names) = over {
            self.stop(Some(&names));
        }
        busy
    }
}

/// "kernel k" or "one of kernels a, b".
fn describe(names: &[Arc<str>]) -> Arc<str> {
    match names {
        [one] => Arc::from(format!("kernel {one}")),
        many => Arc::from(format!(
            "one of kernels {}",
            many.iter().map(|n| &**n).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// What a launch is given by its stream's watch: the epoch it runs under, and the start counter
/// its kernel counts its start in (`ptxvm::sandbox::launch_value` puts both in its hidden
/// `launch` argument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) epoch: u32,
    pub(crate) counter: u32,
}

/// The watch over one sandboxed stream: its launches, fenced in segments.
pub(crate) struct StreamWatch {
    /// Its start counter in the guest's control block (`UNTRACKED` if it has none of its own).
    counter: u32,
    /// Where the counter goes back when the stream's watch does.
    free_counters: Arc<Mutex<Vec<u32>>>,
    q: Mutex<WatchQ>,
}

impl Drop for StreamWatch {
    fn drop(&mut self) {
        // Dropped once its work has ended (the watchdog keeps a watch with work in flight), so
        // the next stream given the counter finds it at the count the control block expects.
        if self.counter != UNTRACKED {
            lock(&self.free_counters).push(self.counter);
        }
    }
}

struct WatchQ {
    /// Launches since the last segment closed, the start count before the first of them, the
    /// last of them, and their kernels.
    open: u32,
    open_first: u32,
    open_last: Option<CompletionObserver>,
    open_names: Vec<Arc<str>>,
    open_since: Instant,
    /// Fenced segments, oldest first; the front one is running.
    segments: VecDeque<Segment>,
    /// When the front segment became the front (or was found not yet begun, or stopped).
    front_since: Instant,
    /// The stream's start time word then (see the module header).
    front_mark: u64,
    /// The tick at which the time word was last seen to change: a launch of the front segment
    /// began since the tick before, and runs now.
    front_began: Option<Instant>,
    /// Set when the guest was stopped while this stream had work: what ran over.
    stopped: Option<Arc<str>>,
    /// The epoch of a launch issued now, outside the lock (a guest's calls on one stream come
    /// one at a time): work a stop must count, not yet counted.
    launching: Option<u32>,
}

struct Segment {
    /// The segment's last launch: the others ended before it (stream order).
    done: CompletionObserver,
    launches: u32,
    /// The stream's start count once every launch before the segment's first had started.
    first: u32,
    names: Vec<Arc<str>>,
}

impl StreamWatch {
    /// Launches through `launch(epoch)` and counts it in the open segment. The epoch is read and
    /// the launch noted under this stream's lock, so a stop never misses a launch it aborts; the
    /// driver call runs outside it (see the module header).
    pub(crate) fn launch<E>(
        &self,
        store: &StoreWatch,
        kernel: &Arc<str>,
        starts: u32,
        launch: impl FnOnce(Stamp) -> Result<Completion, E>,
    ) -> Result<Completion, E> {
        let stamp = self.begin(store);
        let out = launch(stamp);
        let q = self.end();
        let out = out?;
        let names = std::slice::from_ref(kernel);
        self.count(store, q, out.observer(), (1, starts), names);
        Ok(out)
    }

    /// Reads the epoch a launch is given and notes the launch as under way.
    fn begin(&self, store: &StoreWatch) -> Stamp {
        let mut q = lock(&self.q);
        let epoch = store.epoch.load(Ordering::SeqCst);
        q.launching = Some(epoch);
        Stamp {
            epoch,
            counter: self.counter,
        }
    }

    /// The launch under way is issued (or refused): the lock, to count what it issued.
    fn end(&self) -> MutexGuard<'_, WatchQ> {
        let mut q = lock(&self.q);
        q.launching = None;
        q
    }

    /// Counts `n` launches just issued, ending with the one `last` observes, in the open
    /// segment: closed first when they would make it longer than [`FENCE_EVERY`], and after
    /// once it reaches that.
    fn count(
        &self,
        store: &StoreWatch,
        mut q: MutexGuard<'_, WatchQ>,
        last: CompletionObserver,
        (n, starts): (u32, u32),
        names: &[Arc<str>],
    ) {
        if q.open > 0 && q.open + n > FENCE_EVERY {
            self.close(&mut q, &store.ctl);
        }
        let before = store.ctl.issue_starts(self.counter as usize, starts);
        q.open_last = Some(last);
        let first = q.open == 0;
        if first {
            q.open_since = Instant::now();
            q.open_first = before;
        }
        q.open += n;
        for kernel in names {
            if !q.open_names.iter().any(|k| k == kernel) && q.open_names.len() < NAMES_KEPT {
                q.open_names.push(kernel.clone());
            }
        }
        if q.open >= FENCE_EVERY {
            self.close(&mut q, &store.ctl);
        }
        drop(q);
        // After the lock: the watchdog takes its own lock before stream locks.
        if first {
            Watchdog::get().wake();
        }
    }

    /// Issues a batch of launches through `issue(epoch)` (a graph, or launches one by one; the
    /// epoch read and the issue as for one launch) and counts those it issued in the open
    /// segment: closed first when the batch would make it longer than [`FENCE_EVERY`], so a
    /// batch of at most that many never stretches a segment.
    pub(crate) fn launch_batch(
        &self,
        store: &StoreWatch,
        names: &[Arc<str>],
        starts: &[u32],
        issue: impl FnOnce(Stamp) -> Flushed,
    ) -> Flushed {
        let stamp = self.begin(store);
        let out = issue(stamp);
        let q = self.end();
        if let Some(last) = out.issued.last() {
            let launches: u32 = out.issued.iter().map(InFlight::launches).sum();
            // The batch's launches are issued in order, the first `launches` of them.
            let issued = starts.iter().take(launches as usize);
            let starts = issued.fold(0u32, |n, s| n.wrapping_add(*s));
            self.count(store, q, last.done().observer(), (launches, starts), names);
        }
        out
    }

    /// What stopped this stream's work since the last call, if anything did.
    pub(crate) fn take_stopped(&self) -> Option<Arc<str>> {
        lock(&self.q).stopped.take()
    }

    /// Closes the open launches into a segment.
    fn close(&self, q: &mut WatchQ, ctl: &ControlBlock) {
        let names = std::mem::take(&mut q.open_names);
        let launches = std::mem::take(&mut q.open);
        let Some(done) = q.open_last.take() else {
            return;
        };
        if q.segments.is_empty() {
            self.new_front(q, Instant::now(), ctl);
        }
        let first = q.open_first;
        q.segments.push_back(Segment {
            done,
            launches,
            first,
            names,
        });
    }

    /// No launch of the stream is queued or running: the open ones count too, by their last
    /// (they end in stream order), so a Store dropped right after its synchronize is idle
    /// before any tick closed its launches into a segment. Stopping such a Store would store a
    /// new epoch for nothing, and that CPU store pulls the block's page off the device: the next
    /// guest's first kernel to read it then waits for the page to come back (~170 µs per kernel
    /// on the H200, every request of `gpuhost serve`, bench/h200-runs/2026-12-01-s6/).
    fn is_idle(&self) -> bool {
        let q = lock(&self.q);
        q.launching.is_none()
            && q.open_last.as_ref().is_none_or(|c| c.is_done())
            && q.segments.iter().all(|s| s.done.is_done())
    }

    /// The stream's start time word (0 for a stream without a counter of its own, or a block
    /// whose context is gone: neither ever changes).
    fn mark(&self, ctl: &ControlBlock) -> u64 {
        if self.counter == UNTRACKED {
            return 0;
        }
        ctl.started_at(self.counter as usize).unwrap_or(0)
    }

    /// The front segment is charged from `now` (it became the front, was found not begun, or
    /// was stopped), its first launch looked for from the time word as it is now.
    fn new_front(&self, q: &mut WatchQ, now: Instant, ctl: &ControlBlock) {
        q.front_since = now;
        q.front_mark = self.mark(ctl);
        q.front_began = None;
    }

    /// Whether the front segment's running launch ran past its limit (a stream without a
    /// counter of its own: the segment past `limit` per launch from reaching the front). Time
    /// runs from the tick the time word last changed or, with no change seen, from when the
    /// segment became the front, as long as the start counter says it began: a segment none of
    /// whose launches began is not late, and its time starts again (see the module header).
    fn overdue(&self, q: &mut WatchQ, now: Instant, limit: Duration, ctl: &ControlBlock) -> bool {
        let Some(front) = q.segments.front() else {
            return false;
        };
        let (first, launches) = (front.first, front.launches);
        if self.counter == UNTRACKED {
            return now.duration_since(q.front_since) > limit.saturating_mul(launches);
        }
        let mark = self.mark(ctl);
        if mark != q.front_mark {
            q.front_mark = mark;
            q.front_began = Some(now);
        }
        let since = q.front_began.unwrap_or(q.front_since);
        if now.duration_since(since) <= limit {
            return false;
        }
        if q.front_began.is_some() {
            return true;
        }
        // Launches issued on the counter that will never start (their context was lost) leave
        // it behind the count expected: nothing can be told then, and the launch is stopped as
        // one counted from the front. So it is if the block cannot be read.
        let started = ctl.load_starts(self.counter as usize);
        let begun = started.map_or(true, |c| c.wrapping_sub(first) != 0);
        if !begun {
            self.new_front(q, now, ctl);
        }
        begun
    }

    /// Returns (work left, the front segment's kernels if it ran past its budget).
    fn tick(
        &self,
        now: Instant,
        limit: Duration,
        ctl: &ControlBlock,
    ) -> (bool, Option<Vec<Arc<str>>>) {
        let mut q = lock(&self.q);
        // Launching paused for a tick, or the open launches already ended (then they retire
        // just below, and a dropped guest's watch goes at this tick rather than the next).
        let ended = q.open_last.as_ref().is_some_and(|c| c.is_done());
        if q.open > 0 && (ended || now.duration_since(q.open_since) >= TICK) {
            self.close(&mut q, ctl);
        }
        let mut retired = false;
        while q.segments.front().is_some_and(|s| s.done.is_done()) {
            q.segments.pop_front();
            retired = true;
        }
        if retired {
            self.new_front(&mut q, now, ctl);
        }
        let late = if self.overdue(&mut q, now, limit, ctl) {
            q.segments.front().map(|s| s.names.clone())
        } else {
            None
        };
        (
            q.open > 0 || !q.segments.is_empty() || q.launching.is_some(),
            late,
        )
    }
}

/// The process's watchdog thread and the guests it watches.
struct Watchdog {
    stores: Mutex<Vec<Arc<StoreWatch>>>,
    wake: Condvar,
    asleep: AtomicBool,
}

impl Watchdog {
    fn get() -> &'static Watchdog {
        static W: OnceLock<&'static Watchdog> = OnceLock::new();
        W.get_or_init(|| {
            let w: &'static Watchdog = Box::leak(Box::new(Watchdog {
                stores: Mutex::new(Vec::new()),
                wake: Condvar::new(),
                asleep: AtomicBool::new(false),
            }));
            // Without the thread no limit is enforced; a process that cannot spawn one has
            // bigger problems, and launches still work (only slower to be stopped: never).
            let _ = std::thread::Builder::new()
                .name("gpuhost-watchdog".into())
                .spawn(move || w.run());
            w
        })
    }

    fn add(&self, store: Arc<StoreWatch>) {
        lock(&self.stores).push(store);
    }

    /// Stops watching `store` (dropped, with nothing in flight).
    fn forget(&self, store: &Arc<StoreWatch>) {
        lock(&self.stores).retain(|s| !Arc::ptr_eq(s, store));
    }

    /// Wakes the thread if it sleeps for lack of work.
    fn wake(&self) {
        if self.asleep.load(Ordering::SeqCst) {
            let _g = lock(&self.stores);
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        let mut last_busy = Instant::now();
        loop {
            let stores: Vec<Arc<StoreWatch>> = lock(&self.stores).clone();
            let now = Instant::now();
            let mut busy = false;
            let mut gone = Vec::new();
            for s in &stores {
                let work = s.tick(now);
                busy |= work;
                if !work && s.dropped.load(Ordering::SeqCst) {
                    gone.push(s.clone());
                } else if work && s.waited_enough(now) {
                    // Whoever waits gives up now; the watch stays until the work ends.
                    s.drained.notify_waiters();
                }
            }
            // This pass's handles go before the thread sleeps: a dropped guest's watch holds
            // its control block, which a SandboxPool resets only once nothing else holds it
            // (kept across the sleep, it stayed held a tick longer, or up to the idle wait).
            drop(stores);
            if !gone.is_empty() {
                lock(&self.stores).retain(|s| !gone.iter().any(|g| Arc::ptr_eq(g, s)));
                for g in &gone {
                    g.drained.notify_waiters();
                }
                drop(gone);
                // Their pairs may be free now: reset them at once, not at the resetter's tick.
                crate::pool::watches_released();
            }
            if busy {
                last_busy = now;
            }
            if now.duration_since(last_busy) < LINGER {
                std::thread::sleep(TICK);
                continue;
            }
            // Nothing in flight: sleep until a launch or a drop wakes us (re-checking first,
            // under the lock, so a wake between the tick and here is not lost).
            let g = lock(&self.stores);
            self.asleep.store(true, Ordering::SeqCst);
            let idle = g
                .iter()
                .all(|s| s.is_idle() && !s.dropped.load(Ordering::SeqCst));
            let g = if idle {
                self.wake
                    .wait_timeout(g, Duration::from_millis(100))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0)
            } else {
                g
            };
            self.asleep.store(false, Ordering::SeqCst);
            drop(g);
        }
    }
}

#[cfg(test)]
mod tests;
