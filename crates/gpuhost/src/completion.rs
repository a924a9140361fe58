//! Launch completion. Events are recorded on the threads that launch or wait — never by the
//! completion thread while a launching thread is busy on the same stream — and one dedicated
//! thread per host only queries them (cuEventQuery) and wakes their `Completion`s.
//!
//! Who records a stream's completion event, covering every launch queued before it:
//! - the first poll of a `Completion` whose launch is still unrecorded (`.await`);
//! - `Completion::wait`, which then synchronizes on that event itself;
//! - the launching thread, once every `FLUSH_EVERY` launches (amortised), so dropped
//!   completions still release what they keep alive;
//! - dropping the `Stream`;
//! - `Stream::fence`, whose Completion (no launch of its own) joins the batch it closes;
//! - the completion thread, only for a stream whose queue has not changed for `IDLE_FLUSH`
//!   (nobody is launching on it, so nothing contends).
//!
//! The thread spins (yielding, with bounded backoff) while events are pending, for low completion
//! latency, and parks on a condvar when idle; handing it work costs a futex wake only when it is
//! parked. Executor threads never block on the device; there is no spawn_blocking per launch.
//!
//! Spin before parking: a poll that finds its launch unfinished watches it for a short budget
//! ([`Host::set_await_spin`]) before returning Pending. A launch that ends within the budget then
//! costs its executor no wake-up at all — for one that parks its thread (`block_on`) the futex
//! wake and the scheduler's latency are most of what `.await` adds to a short kernel. By the
//! classic spin-then-block argument the budget is about one park-and-wake round trip (~5–10 µs
//! on a VM): a wait that ends within it is caught, and one that does not costs at most twice
//! what blocking at once would. `gpuhost bench` measures budgets side by side.
//!
//! While it spins, the poll queries the batch's event itself and finishes the batch's outcome
//! when the event has completed: waiting for the completion thread's next pass and its hand-off
//! added about 2 µs to every `.await` on the H200 (10.4 µs against 8.4 for launch + sync). The
//! completion thread still releases what the batch keeps alive and counts it done. It lends the
//! event out through [`BatchOutcome`]: before it recycles the event it retracts it and waits for
//! the queries in flight, so a poll never queries an event that belongs to another batch.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUevent, CUevent_st, CUresult};

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::launch::Arg;
use crate::pinned::Pinned;
use crate::registry::{Kernel, LaunchGuard};
use crate::result;

/// The outcome slot shared by the launches of one batch (issued on one stream between two
/// recorded events, so they complete together) and by their Completions: one allocation per
/// batch, not per launch.
#[derive(Default)]
struct BatchOutcome {
    /// Set (Release) after the result is stored: the lock-free fast path of `wait`/`is_done`.
    finished: AtomicBool,
    /// Set once an event covering the launches is recorded: later polls need not flush.
    recorded: AtomicBool,
    /// The event that closes the batch, lent to polling threads while the completion thread
    /// owns it (null before it is recorded and once the completion thread takes it back).
    event: AtomicPtr<CUevent_st>,
    /// The context generation `event` belongs to (written before `event` is published).
    event_generation: AtomicU64,
    /// Polls inside a query of `event`: the completion thread waits for none before it recycles
    /// the event.
    querying: AtomicU32,
    state: Mutex<BatchState>,
}

#[derive(Default)]
struct BatchState {
    result: Option<Result<()>>,
    finished: bool,
    /// One per distinct task polling a Completion of the batch.
    wakers: Vec<Waker>,
    /// What the batch keeps alive, moved here when its event is lent: whoever sees the event
    /// complete first (a poll or the completion thread) releases it before finishing, so a
    /// finished Completion never leaves a buffer or staging region in a batch's hands.
    kept: Kept,
}

/// What a batch keeps alive until it completes.
#[derive(Default)]
struct Kept {
    /// The buffers its launches use.
    buffers: Vec<DeviceBuffer>,
    /// Page-locked regions of transfers fenced by this batch, kept until their DMA is done.
    staging: Vec<Arc<Pinned>>,
    /// One guard per registry whose kernels it launches: the batch completes as a whole, so
    /// one keeps the modules loaded as long as one per launch would (without an atomic
    /// increment per launch on a line the completion thread also writes).
    guards: Vec<LaunchGuard>,
}

impl Kept {
    /// Release all of it; `ok` is false when the batch's event was never reached (copies on its
    /// staging chunks may still run, so they are marked unknown and never reused).
    fn release(self, ok: bool) {
        let Kept {
            buffers,
            staging,
            guards,
        } = self;
        drop(buffers);
        if !ok {
            for s in &staging {
                s.mark_unknown();
            }
        }
        drop(staging);
        drop(guards);
    }

    fn append(&mut self, other: &mut Kept) {
        self.buffers.append(&mut other.buffers);
        self.staging.append(&mut other.staging);
        self.guards.append(&mut other.guards);
    }
}

impl BatchOutcome {
    fn lock(&self) -> std::sync::MutexGuard<'_, BatchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, result: Result<()>) {
        let wakers = {
            let mut s = self.lock();
            if s.finished {
                return;
            }
            s.result = Some(result);
            s.finished = true;
            self.finished.store(true, Ordering::Release);
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Lend the batch's closing event to polling threads (see the module header).
    fn lend_event(&self, event: CUevent, generation: u64) {
        self.event_generation.store(generation, Ordering::Relaxed);
        self.event.store(event, Ordering::SeqCst);
    }

    /// Take the event back: once this returns no poll is querying it, nor will one.
    fn retract_event(&self) {
        self.event.store(std::ptr::null_mut(), Ordering::SeqCst);
        // Both sides are SeqCst: a poll that increments `querying` after this load sees the
        // null; one that incremented before it is waited for.
        while self.querying.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }

    /// Query the lent event; finish the batch successfully when it has completed. Errors are
    /// left to the completion thread, which classifies them (a poisoned context, a lost one).
    fn finish_if_event_done(&self, stream: &dyn Flush) -> bool {
        self.querying.fetch_add(1, Ordering::SeqCst);
        let event = self.event.load(Ordering::SeqCst);
        let done = !event.is_null()
            && stream.event_done(event, self.event_generation.load(Ordering::Relaxed));
        self.querying.fetch_sub(1, Ordering::SeqCst);
        if done {
            let kept = std::mem::take(&mut self.lock().kept);
            kept.release(true);
            self.finish(Ok(()));
        }
        done
    }

    /// The outcome (every Completion of the batch gets its own copy).
    fn result(&self) -> Result<()> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.result.clone().unwrap_or(Ok(()))
    }
}

/// The completion of one launch: `.await` it, or `wait()` from non-async code. Dropping it does
/// not cancel the launch (the GPU work and what it keeps alive complete regardless).
#[must_use = "a launch's errors arrive through its Completion"]
pub struct Completion {
    cell: Arc<BatchOutcome>,
    stream: Arc<dyn Flush>,
}

impl Completion {
    /// Block the calling thread until the launch completes. The caller records an event after
    /// everything queued on the stream and synchronizes on it (as cuStreamSynchronize would),
    /// completing those launches itself instead of waiting for the completion thread's hand-off.
    pub fn wait(self) -> Result<()> {
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.result();
        }
        let synced = self.stream.sync_point();
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.result();
        }
        synced
    }

    /// True once the launch has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell.finished.load(Ordering::Acquire)
    }

    /// A handle that only tells whether this launch has completed. It makes no driver call,
    /// ever: a watchdog can poll it while another thread waits inside the driver for the very
    /// kernel the watchdog may have to stop. (The launch completes as for any Completion: when
    /// someone awaits it, or the completion thread records its idle stream.)
    pub fn observer(&self) -> CompletionObserver {
        CompletionObserver {
            cell: Arc::clone(&self.cell),
        }
    }
}

/// See [`Completion::observer`].
#[derive(Clone)]
pub struct CompletionObserver {
    cell: Arc<BatchOutcome>,
}

impl CompletionObserver {
    /// True once the launch has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell.finished.load(Ordering::Acquire)
    }
}

impl Future for Completion {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if self.cell.finished.load(Ordering::Acquire) {
            return Poll::Ready(self.cell.result());
        }
        // Recorded before we look: the completion thread can only finish a recorded batch.
        if !self.cell.recorded.load(Ordering::Acquire) {
            self.stream.flush();
        }
        let budget = self.stream.await_spin();
        if !budget.is_zero() && spin_until_finished(&self.cell, &*self.stream, budget) {
            return Poll::Ready(self.cell.result());
        }
        let mut s = self.cell.state.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the lock `finish` takes: either it finished (we return), or it will wake
        // the waker stored here.
        if s.finished {
            return Poll::Ready(s.result.clone().unwrap_or(Ok(())));
        }
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Watches `cell` for up to `budget`, querying its event between looks; true once it finished.
/// Every few rounds it yields the core: where cores are scarce, the thread that would finish the
/// launch (a software driver's worker) may need this very one; where they are not, a yield
/// returns at once.
fn spin_until_finished(cell: &BatchOutcome, stream: &dyn Flush, budget: Duration) -> bool {
    let start = Instant::now();
    let mut round = 0u32;
    loop {
        if cell.finished.load(Ordering::Acquire) || cell.finish_if_event_done(stream) {
            return true;
        }
        if start.elapsed() >= budget {
            return false;
        }
        round = round.wrapping_add(1);
        if round.is_multiple_of(8) {
            std::thread::yield_now();
        } else {
            for _ in 0..8 {
                std::hint::spin_loop();
            }
        }
    }
}

/// The default of [`Host::set_await_spin`], in nanoseconds (see the module header).
pub(crate) const DEFAULT_AWAIT_SPIN_NS: u64 = 10_000;
/// The longest budget [`Host::set_await_spin`] accepts: spinning longer only burns the thread.
pub const MAX_AWAIT_SPIN: Duration = Duration::from_millis(1);

impl Host {
    /// Sets how long a poll of this host's `Completion`s watches an unfinished launch before it
    /// returns Pending (default 10 µs; zero: never spin; capped at [`MAX_AWAIT_SPIN`]). Longer
    /// catches longer kernels without a wake-up, and holds the executor thread that long.
    pub fn set_await_spin(&self, budget: Duration) {
        let ns = budget.min(MAX_AWAIT_SPIN).as_nanos() as u64;
        self.await_spin_ns.store(ns, Ordering::Relaxed);
    }

    /// How long a poll watches an unfinished launch before returning Pending.
    pub fn await_spin(&self) -> Duration {
        Duration::from_nanos(self.await_spin_ns.load(Ordering::Relaxed))
    }
}

/// The launches issued on a stream since its last recorded event, not completed yet: they
/// share one outcome slot.
pub(crate) struct Launched {
    cell: Arc<BatchOutcome>,
    /// Launches in the batch.
    n: usize,
    /// What it keeps alive until it completes (moved to `cell` when its event is lent).
    kept: Kept,
}

impl Launched {
    /// An empty batch with a fresh outcome slot.
    pub(crate) fn new() -> Self {
        Self {
            cell: Arc::new(BatchOutcome::default()),
            n: 0,
            kept: Kept::default(),
        }
    }

    /// Add a launch of `kernel` with `args` just issued, keeping its buffer arguments and its
    /// kernel's modules alive until the batch completes (no allocation per launch: the batch's
    /// vectors grow amortised).
    pub(crate) fn add(
        &mut self,
        kernel: &Kernel,
        args: &[Arg<'_>],
        stream: Arc<dyn Flush>,
    ) -> Completion {
        let kept = &mut self.kept;
        if !kept.guards.iter().rev().any(|g| kernel.guarded_by(g)) {
            kept.guards.push(kernel.launch_guard());
        }
        for a in args {
            if let Arg::Buffer(b, _) = a {
                kept.buffers.push((*b).clone());
            }
        }
        self.n += 1;
        Completion {
            cell: self.cell.clone(),
            stream,
        }
    }

    /// Keep `buffers` and `staging` alive until the batch completes (work other than launches,
    /// enqueued before the event that closes it, uses them).
    pub(crate) fn keep(&mut self, buffers: &[&DeviceBuffer], staging: Option<Arc<Pinned>>) {
        self.kept
            .buffers
            .extend(buffers.iter().map(|b| (*b).clone()));
        self.kept.staging.extend(staging);
    }

    /// A Completion of the batch that is no launch of its own (a fence): it resolves with the
    /// batch, and is not counted in the host's launch stats.
    pub(crate) fn completion(&self, stream: Arc<dyn Flush>) -> Completion {
        Completion {
            cell: self.cell.clone(),
            stream,
        }
    }

    /// Launches in the batch.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Mark that an event covering the batch has been recorded.
    pub(crate) fn recorded(&self) {
        self.cell.recorded.store(true, Ordering::Release);
    }

    /// Lend `event`, just recorded after the batch, to polls of its Completions, with what the
    /// batch keeps alive (the first to see the event complete releases it).
    pub(crate) fn lend_event(&mut self, event: CUevent, generation: u64) {
        self.cell.lock().kept = std::mem::take(&mut self.kept);
        self.cell.lend_event(event, generation);
    }
}

/// Complete a batch with `outcome`: release what it keeps alive, then wake its Completions,
/// then count its launches done.
pub(crate) fn complete(host: &Host, launched: Launched, outcome: &Result<()>) {
    let Launched { cell, n, mut kept } = launched;
    kept.append(&mut cell.lock().kept);
    kept.release(outcome.is_ok());
    cell.finish(outcome.clone());
    host.counters
        .completed
        .0
        .fetch_add(n as u64, Ordering::Release);
}

/// Launches covered by one recorded event: all complete when it does.
pub(crate) struct Batch {
    pub(crate) event: CUevent,
    pub(crate) generation: u64,
    pub(crate) launches: Launched,
}

// SAFETY: CUevent is a driver handle usable from any thread with its context bound; the
// completion thread binds it before querying.
unsafe impl Send for Batch {}

/// A stream's queue of launches whose completion event is not recorded yet.
pub(crate) trait Flush: Send + Sync {
    /// Record an event after the unrecorded launches (on the calling thread) and hand them to
    /// the completion thread as a batch. Nothing to do when the queue is empty.
    fn flush(&self);

    /// Block until everything enqueued so far has finished, completing the queued launches.
    fn sync_point(&self) -> Result<()>;

    /// (launches queued, launches ever queued): the second changes whenever the queue grows.
    fn activity(&self) -> (usize, u64);

    /// The stream's "watched by the completion thread" flag.
    fn watched(&self) -> &AtomicBool;

    /// How long a poll watches an unfinished launch of the stream before returning Pending.
    fn await_spin(&self) -> Duration;

    /// True when `event`, of context generation `generation`, has completed without error.
    /// The caller guarantees the event is live (lent by a [`BatchOutcome`]).
    fn event_done(&self, event: CUevent, generation: u64) -> bool;
}

#[derive(Default)]
struct Inbox {
    batches: Vec<Batch>,
    streams: Vec<Arc<dyn Flush>>,
    sleeping: bool,
}

/// The per-host completion thread's inbox.
struct Shared {
    inbox: Mutex<Inbox>,
    /// Something is in the inbox: lets the spinning thread skip the lock on empty passes.
    news: AtomicBool,
    cv: Condvar,
}

impl Shared {
    fn start(host: Arc<Host>) -> Arc<Self> {
        let me = Arc::new(Self {
            inbox: Mutex::default(),
            news: AtomicBool::new(false),
            cv: Condvar::new(),
        });
        let c = me.clone();
        let ordinal = host.ordinal();
        let spawned = std::thread::Builder::new()
            .name(format!("gpuhost-complete-{ordinal}"))
            .spawn(move || run(host, c));
        if let Err(e) = spawned {
            // Without the thread nothing completes; waiting callers would hang, so say so loudly.
            tracing::error!("cannot start the gpuhost completion thread: {e}");
        }
        me
    }

    fn post(&self, f: impl FnOnce(&mut Inbox)) {
        let mut q = self.inbox.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut q);
        self.news.store(true, Ordering::Release);
        // Waking costs a syscall: only when the thread is really parked.
        if q.sleeping {
            q.sleeping = false;
            self.cv.notify_one();
        }
    }
}

fn completer(host: &Arc<Host>) -> &Shared {
    &host
        .completer
        .get_or_init(|| Completer(Shared::start(host.clone())))
        .0
}

/// The host's handle on its completion thread (started on first use).
pub(crate) struct Completer(Arc<Shared>);

/// Count a launch (enqueued, pending) for the host's stats.
pub(crate) fn count_launch(host: &Host) {
    host.counters.launches.0.fetch_add(1, Ordering::Release);
}

/// Hand a recorded batch to the completion thread, which queries its event.
pub(crate) fn hand_over(host: &Arc<Host>, batch: Batch) {
    completer(host).post(|q| q.batches.push(batch));
}

/// Make sure the completion thread watches `stream` (so a queue nobody flushes is flushed once
/// idle). Costs one atomic swap when it is watched already.
pub(crate) fn watch<S: Flush + 'static>(host: &Arc<Host>, stream: &Arc<S>) {
    if !stream.watched().swap(true, Ordering::SeqCst) {
        completer(host).post(|q| q.streams.push(stream.clone() as Arc<dyn Flush>));
    }
}

/// A stream queue unchanged this long is flushed by the completion thread.
const IDLE_FLUSH: Duration = Duration::from_micros(200);
/// How often the completion thread looks at watched streams' queues.
const WATCH_PERIOD: Duration = Duration::from_micros(50);
/// A watched stream with an empty queue this long is forgotten until its next launch.
const UNWATCH_AFTER: Duration = Duration::from_millis(2);
/// Passes with nothing finishing before the thread backs off to short sleeps (events pending) or
/// waits on its condvar (no events pending: parked, or woken every WATCH_PERIOD while watching).
const SPIN_ROUNDS: u32 = 20_000;
const IDLE_SPIN_ROUNDS: u32 = 2_000;
const BACKOFF: Duration = Duration::from_micros(50);

/// A stream the completion thread watches: its activity counter when last seen and since when.
struct Watched {
    stream: Arc<dyn Flush>,
    seen: u64,
    since: Instant,
}

fn run(host: Arc<Host>, c: Arc<Shared>) {
    let mut pending: Vec<Batch> = Vec::new();
    let mut watched: Vec<Watched> = Vec::new();
    let mut last_watch = Instant::now();
    let mut quiet_rounds = 0u32;
    loop {
        let mut progressed = false;
        let settled = pending.is_empty() && quiet_rounds >= IDLE_SPIN_ROUNDS;
        if c.news.swap(false, Ordering::Acquire) || settled {
            let mut q = c.inbox.lock().unwrap_or_else(|p| p.into_inner());
            let empty = |q: &Inbox| q.batches.is_empty() && q.streams.is_empty();
            if settled && empty(&q) {
                // Nothing to query: stop spinning (a spinning thread may share a core with a
                // launching one). Park, or only until the next look at watched streams.
                q.sleeping = true;
                if watched.is_empty() {
                    while q.sleeping && empty(&q) {
                        q = c.cv.wait(q).unwrap_or_else(|p| p.into_inner());
                    }
                } else {
                    q =
                        c.cv.wait_timeout(q, WATCH_PERIOD)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                }
                q.sleeping = false;
            }
            c.news.store(false, Ordering::Relaxed);
            if !empty(&q) {
                progressed = true;
            }
            pending.append(&mut q.batches);
            let now = Instant::now();
            watched.extend(q.streams.drain(..).map(|stream| Watched {
                stream,
                seen: u64::MAX,
                since: now,
            }));
        }
        if !pending.is_empty() {
            match host.enter() {
                Ok(generation) => {
                    let before = pending.len();
                    let mut i = 0;
                    while i < pending.len() {
                        match poll_batch(&host, &pending[i], generation) {
                            None => i += 1,
                            Some(outcome) => {
                                let b = pending.swap_remove(i);
                                complete(&host, b.launches, &outcome);
                            }
                        }
                    }
                    progressed |= pending.len() < before;
                }
                Err(e) => {
                    tracing::warn!("completion thread cannot bind the context: {e}");
                    std::thread::sleep(BACKOFF);
                }
            }
        }
        if !watched.is_empty() && last_watch.elapsed() >= WATCH_PERIOD {
            last_watch = Instant::now();
            progressed |= flush_idle_streams(&mut watched, last_watch);
        }
        quiet_rounds = if progressed {
            0
        } else {
            quiet_rounds.saturating_add(1)
        };
        if !pending.is_empty() && quiet_rounds >= SPIN_ROUNDS {
            std::thread::sleep(BACKOFF);
        } else {
            std::thread::yield_now();
        }
    }
}

/// Flush watched streams idle for IDLE_FLUSH, forget those empty for UNWATCH_AFTER; true when
/// something was flushed.
fn flush_idle_streams(watched: &mut Vec<Watched>, now: Instant) -> bool {
    let mut flushed = false;
    watched.retain_mut(|w| {
        let (queued, pushed) = w.stream.activity();
        if pushed != w.seen {
            w.seen = pushed;
            w.since = now;
            return true;
        }
        let still = now.duration_since(w.since);
        if queued > 0 {
            if still >= IDLE_FLUSH {
                // Nobody has launched on this stream for a while: recording here contends
                // with no launching thread.
                w.stream.flush();
                flushed = true;
            }
            return true;
        }
        if still < UNWATCH_AFTER {
            return true;
        }
        // Forget it; a launch racing this sees the cleared flag and watches it again (both
        // sides use SeqCst: either it sees false, or we see its queued launch).
        w.stream.watched().store(false, Ordering::SeqCst);
        if w.stream.activity().0 > 0 && !w.stream.watched().swap(true, Ordering::SeqCst) {
            return true;
        }
        false
    });
    flushed
}

/// Query one batch; its outcome once it is finished (the caller completes it).
fn poll_batch(host: &Host, b: &Batch, generation: u64) -> Option<Result<()>> {
    let outcome = if b.generation != generation {
        b.launches.cell.retract_event();
        // Forget the dead context's event (never destroy it: its value may be reused).
        host.return_event(b.generation, b.event, false);
        Err(Error::ContextLost { generation })
    } else {
        // SAFETY: the event belongs to the current context (same generation), which is bound.
        let r = unsafe { result::stream::event_query(b.event) };
        if matches!(r, Err(e) if e.is(CUresult::CUDA_ERROR_NOT_READY)) {
            return None;
        }
        let res = host.check_at(r, b.generation);
        b.launches.cell.retract_event();
        if res.is_ok() {
            host.return_event(b.generation, b.event, false);
        }
        res
    };
    Some(outcome)
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(Mutex<bool>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() = true;
        }
    }

    type OnSync = Box<dyn Fn() -> Result<()> + Send + Sync>;

    /// A stand-in stream: its sync point runs `on_sync`, polls spin for `spin`, lent events
    /// report `done`; flushes and event queries are counted.
    struct Fake {
        on_sync: OnSync,
        spin: Duration,
        done: bool,
        watched: AtomicBool,
        flushes: AtomicU32,
        queries: AtomicU32,
    }

    impl Fake {
        fn new(spin: Duration, done: bool) -> Arc<Self> {
            Self::syncing(spin, done, Box::new(|| Ok(())))
        }

        fn syncing(spin: Duration, done: bool, on_sync: OnSync) -> Arc<Self> {
            Arc::new(Self {
                on_sync,
                spin,
                done,
                watched: AtomicBool::new(false),
                flushes: AtomicU32::new(0),
                queries: AtomicU32::new(0),
            })
        }
    }

    impl Flush for Fake {
        fn flush(&self) {
            self.flushes.fetch_add(1, Ordering::SeqCst);
        }
        fn sync_point(&self) -> Result<()> {
            (self.on_sync)()
        }
        fn activity(&self) -> (usize, u64) {
            (0, 0)
        }
        fn watched(&self) -> &AtomicBool {
            &self.watched
        }
        fn await_spin(&self) -> Duration {
            self.spin
        }
        fn event_done(&self, _: CUevent, _: u64) -> bool {
            self.queries.fetch_add(1, Ordering::SeqCst);
            self.done
        }
    }

    #[test]
    fn a_poll_with_a_spin_budget_returns_ready_without_a_wake_when_the_launch_ends_within_it() {
        let cell = Arc::new(BatchOutcome::default());
        let mut c = Completion {
            cell: cell.clone(),
            stream: Fake::new(Duration::from_secs(30), false),
        };
        let finisher = {
            let cell = cell.clone();
            std::thread::spawn(move || cell.finish(Err(Error::ContextLost { generation: 4 })))
        };
        let flag = Arc::new(Flag(Mutex::new(false)));
        let waker = Waker::from(flag.clone());
        match Pin::new(&mut c).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(Err(Error::ContextLost { generation: 4 })) => {}
            other => panic!("expected the outcome on the first poll, got {other:?}"),
        }
        finisher.join().unwrap();
        assert!(
            !*flag.0.lock().unwrap(),
            "no waker was stored, so none was woken"
        );
        let mut idle = Completion {
            cell: Arc::new(BatchOutcome::default()),
            stream: Fake::new(Duration::ZERO, false),
        };
        assert!(
            Pin::new(&mut idle)
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    fn completion(
        cell: &Arc<BatchOutcome>,
        on_sync: impl Fn() -> Result<()> + Send + Sync + 'static,
    ) -> Completion {
        Completion {
            cell: cell.clone(),
            stream: Fake::syncing(Duration::ZERO, false, Box::new(on_sync)),
        }
    }

    /// A stand-in for a recorded event: only the stand-in stream above ever sees it.
    fn fake_event() -> CUevent {
        std::ptr::NonNull::<CUevent_st>::dangling().as_ptr()
    }

    #[test]
    fn a_poll_finishes_its_batch_from_the_lent_event_without_the_completion_thread() {
        let mut batch = Launched::new();
        batch.lend_event(fake_event(), 1);
        let stream = Fake::new(Duration::from_millis(1), true);
        let mut c = batch.completion(stream.clone());
        let waker = Waker::from(Arc::new(Flag(Mutex::new(false))));
        assert!(matches!(
            Pin::new(&mut c).poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(
            stream.queries.load(Ordering::SeqCst),
            1,
            "one query sufficed"
        );
        // The completion thread's pass afterwards changes nothing for the Completion.
        batch.cell.retract_event();
        batch.cell.finish(Err(Error::ContextLost { generation: 2 }));
        assert!(matches!(c.cell.result(), Ok(())));
    }

    #[test]
    fn a_retracted_event_is_never_queried_again() {
        let mut batch = Launched::new();
        batch.lend_event(fake_event(), 1);
        let stream = Fake::new(Duration::from_millis(1), false);
        assert!(!batch.cell.finish_if_event_done(&*stream));
        assert_eq!(stream.queries.load(Ordering::SeqCst), 1);
        batch.cell.retract_event();
        assert!(!batch.cell.finish_if_event_done(&*stream));
        assert_eq!(
            stream.queries.load(Ordering::SeqCst),
            1,
            "the completion thread may recycle a retracted event: no poll may query it"
        );
    }

    #[test]
    fn completion_future_is_woken_when_the_cell_finishes() {
        let cell = Arc::new(BatchOutcome::default());
        let mut c = completion(&cell, || Ok(()));
        let flag = Arc::new(Flag(Mutex::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        assert!(!c.is_done());
        cell.finish(Err(Error::ContextLost { generation: 3 }));
        assert!(*flag.0.lock().unwrap() && c.is_done());
        match Pin::new(&mut c).poll(&mut cx) {
            Poll::Ready(Err(Error::ContextLost { generation: 3 })) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn every_completion_of_a_batch_is_woken_and_gets_the_outcome() {
        let batch = Launched::new();
        let stream: Arc<dyn Flush> = Fake::new(Duration::ZERO, false);
        let mut cs: Vec<Completion> = (0..3)
            .map(|_| Completion {
                cell: batch.cell.clone(),
                stream: stream.clone(),
            })
            .collect();
        let flags: Vec<_> = (0..3).map(|_| Arc::new(Flag(Mutex::new(false)))).collect();
        for (c, f) in cs.iter_mut().zip(&flags) {
            let waker = Waker::from(f.clone());
            assert!(
                Pin::new(c)
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
        }
        batch.cell.finish(Err(Error::ContextLost { generation: 5 }));
        assert!(flags.iter().all(|f| *f.0.lock().unwrap()));
        for mut c in cs {
            let waker = Waker::from(flags[0].clone());
            assert!(matches!(
                Pin::new(&mut c).poll(&mut Context::from_waker(&waker)),
                Poll::Ready(Err(Error::ContextLost { generation: 5 }))
            ));
        }
    }

    #[test]
    fn polling_flushes_the_stream_until_the_launch_is_recorded() {
        let cell = Arc::new(BatchOutcome::default());
        let stream = Fake::new(Duration::ZERO, false);
        let mut c = Completion {
            cell: cell.clone(),
            stream: stream.clone(),
        };
        let waker = Waker::from(Arc::new(Flag(Mutex::new(false))));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        assert_eq!(stream.flushes.load(Ordering::SeqCst), 1);
        cell.recorded.store(true, Ordering::Release);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        assert_eq!(
            stream.flushes.load(Ordering::SeqCst),
            1,
            "a recorded launch is not flushed again"
        );
        cell.finish(Ok(()));
        assert!(matches!(
            Pin::new(&mut c).poll(&mut cx),
            Poll::Ready(Ok(()))
        ));
    }

    #[test]
    fn blocking_wait_reports_the_completion_threads_result_when_it_came_first() {
        let cell = Arc::new(BatchOutcome::default());
        let c2 = cell.clone();
        let c = completion(&cell, move || {
            c2.finish(Err(Error::ContextLost { generation: 9 }));
            Ok(())
        });
        assert!(matches!(
            c.wait(),
            Err(Error::ContextLost { generation: 9 })
        ));
    }

    #[test]
    fn blocking_wait_reports_the_sync_error_otherwise() {
        let cell = Arc::new(BatchOutcome::default());
        let c = completion(&cell, || {
            Err(Error::ContextPoisoned {
                call: "cuEventSynchronize",
                name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            })
        });
        assert!(matches!(c.wait(), Err(Error::ContextPoisoned { .. })));
    }
}
