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
//! A spinning poll watches the outcome slot. The exception is the first poll of an unrecorded
//! batch, when no other poll of the host is doing the same: it keeps the batch it records and
//! queries the event itself for its budget, completing the batch on its own thread (inline.rs).
//! Letting every spinning poll query (3d3c6e3, reverted) made launch → `.await` 15.6 µs against
//! 10.4 on the H200 (raw launch + sync 8.8): cuEventQuery from every spinning executor thread
//! contended in the driver, and the parallel gpuhost-wasm suite stalled, as the completion
//! thread then had to wait for polls inside the driver before it could recycle an event.
//!
//! Measured on the H200 (bench/h200-runs/2026-12-01-s8/, `gpuhost bench`'s await table): raw
//! launch + cuEventRecord + a tight cuEventQuery loop on the caller's thread takes what raw
//! launch + cuStreamSynchronize takes (8.63 against 8.61 µs), so the event costs nothing; the
//! ~1.9 µs `.await` then added was the hand-off through this thread. Letting this thread skip its
//! `yield_now` while a poll spins (tried in bc8be74) did not change it (10.44–10.57 µs against
//! 10.41), and was reverted.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent;
use smallvec::SmallVec;

use crate::buffer::{DeviceBuffer, keep_once, keep_owned};
use crate::error::Result;
use crate::host::Host;
use crate::launch::Arg;
use crate::pinned::Pinned;
use crate::registry::{Kernel, LaunchGuard};

mod inline;
mod thread;

pub(crate) use thread::{Completer, hand_over, watch};

/// The outcome slot shared by the launches of one batch (issued on one stream between two
/// recorded events, so they complete together) and by their Completions: one allocation per
/// batch, not per launch.
struct BatchOutcome {
    /// Set (Release) after the result is stored: the lock-free fast path of `wait`/`is_done`.
    finished: AtomicBool,
    /// Set once an event covering the launches is recorded: later polls need not flush.
    recorded: AtomicBool,
    state: Mutex<BatchState>,
    /// The stream the batch was issued on, which polls flush and `wait` synchronizes: held here
    /// once per batch rather than by each Completion, so a launch clones no stream handle.
    /// None only for a dropped stream's last, empty batch (nothing can join it).
    stream: Option<Arc<dyn Flush>>,
}

#[derive(Default)]
struct BatchState {
    result: Option<Result<()>>,
    finished: bool,
    /// One per distinct task polling a Completion of the batch (inline for the usual one: a
    /// launch alone on an idle stream is a batch, and allocating here was ~100–180
    /// instructions of each such launch's `.await`).
    wakers: SmallVec<[Waker; 1]>,
}

impl BatchOutcome {
    fn new(stream: Option<Arc<dyn Flush>>) -> Self {
        Self {
            finished: AtomicBool::new(false),
            recorded: AtomicBool::new(false),
            state: Mutex::default(),
            stream,
        }
    }

    fn finish(&self, result: Result<()>) {
        let wakers = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
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
}

impl Completion {
    /// Block the calling thread until the launch completes. The caller records an event after
    /// everything queued on the stream and synchronizes on it (as cuStreamSynchronize would),
    /// completing those launches itself instead of waiting for the completion thread's hand-off.
    pub fn wait(self) -> Result<()> {
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.result();
        }
        let Some(stream) = &self.cell.stream else {
            // Unreachable (a dropped stream's last batch has no Completion): wait it out.
            while !self.cell.finished.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            return self.cell.result();
        };
        let synced = stream.sync_point();
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.result();
        }
        synced
    }

    /// True once the launch has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell.finished.load(Ordering::Acquire)
    }

    /// Another Completion of the same batch (several owners of one fence, each awaiting it).
    pub(crate) fn share(&self) -> Completion {
        Completion {
            cell: Arc::clone(&self.cell),
        }
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
        let stream = self.cell.stream.as_deref();
        let budget = stream.map_or(Duration::ZERO, |s| s.await_spin());
        let mut spun = false;
        // Recorded before we look: the completion thread can only finish a recorded batch.
        if !self.cell.recorded.load(Ordering::Acquire)
            && let Some(s) = stream
        {
            match inline::complete_here(&self.cell, s, budget) {
                inline::Inline::Done => return Poll::Ready(self.cell.result()),
                inline::Inline::HandedOver => spun = true,
                inline::Inline::NotTried => s.flush(),
            }
        }
        if !spun && !budget.is_zero() && spin_until_finished(&self.cell, budget) {
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

/// Watches `cell` for up to `budget`; true once it finished. Between short bursts of looks it
/// yields the core: where cores are scarce, the completion thread (or a software driver's
/// worker) that would finish the launch may need this very one; where they are not, a yield
/// returns at once.
fn spin_until_finished(cell: &BatchOutcome, budget: Duration) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..32 {
            if cell.finished.load(Ordering::Acquire) {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return false;
        }
        std::thread::yield_now();
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

/// Buffers a batch keeps without an allocation: a launch alone on an idle stream is a batch of
/// its own, and two vectors allocated and freed per batch were ~320 instructions of every such
/// launch (callgrind, session 13).
const INLINE_BUFFERS: usize = 4;
/// Registries a batch guards without an allocation (one, nearly always).
const INLINE_GUARDS: usize = 2;

/// The launches issued on a stream since its last recorded event, not completed yet: they
/// share one outcome slot.
pub(crate) struct Launched {
    cell: Arc<BatchOutcome>,
    /// Launches in the batch.
    n: usize,
    /// The buffers its launches use, kept alive until it completes.
    buffers: SmallVec<[DeviceBuffer; INLINE_BUFFERS]>,
    /// Page-locked regions of transfers fenced by this batch, kept until their DMA is done.
    staging: Vec<Arc<Pinned>>,
    /// One guard per registry whose kernels it launches: the batch completes as a whole, so
    /// one keeps the modules loaded as long as one per launch would (without an atomic
    /// increment per launch on a line the completion thread also writes).
    guards: SmallVec<[LaunchGuard; INLINE_GUARDS]>,
}

impl Launched {
    /// An empty batch of `stream` with a fresh outcome slot (no stream: a dropped stream's last
    /// batch, which nothing joins).
    pub(crate) fn new(stream: Option<Arc<dyn Flush>>) -> Self {
        Self {
            cell: Arc::new(BatchOutcome::new(stream)),
            n: 0,
            buffers: SmallVec::new(),
            staging: Vec::new(),
            guards: SmallVec::new(),
        }
    }

    /// Add a launch of `kernel` with `args` just issued, keeping its buffer arguments and its
    /// kernel's modules alive until the batch completes (no allocation per launch: the batch's
    /// lists hold a few inline and grow amortised beyond).
    #[inline]
    pub(crate) fn add(&mut self, kernel: &Kernel, args: &[Arg<'_>]) -> Completion {
        self.guard(kernel);
        for a in args {
            if let Arg::Buffer(b, _) = a {
                // One handle per buffer keeps it alive for the whole batch.
                keep_once(&mut self.buffers, b);
            }
        }
        self.n += 1;
        Completion {
            cell: self.cell.clone(),
        }
    }

    /// Add one replay of a graph of `n` launches of `kernels` (each of the graph's kernels at
    /// least once) using `buffers` (handed over), just issued: one Completion for all of them,
    /// since they end together, counted as `n` launches of the batch.
    pub(crate) fn add_graph(
        &mut self,
        kernels: &[Kernel],
        buffers: impl IntoIterator<Item = DeviceBuffer>,
        n: usize,
    ) -> Completion {
        for kernel in kernels {
            self.guard(kernel);
        }
        for b in buffers {
            keep_owned(&mut self.buffers, b);
        }
        self.n += n;
        Completion {
            cell: self.cell.clone(),
        }
    }

    /// Keeps `kernel`'s modules loaded until the batch completes: one guard per registry.
    /// Inlined for the usual look (the batch's last guard is the kernel's registry's).
    #[inline]
    fn guard(&mut self, kernel: &Kernel) {
        if !self.guards.last().is_some_and(|g| kernel.guarded_by(g)) {
            self.guard_other(kernel);
        }
    }

    /// [`Launched::guard`] when the batch's last guard is another registry's.
    #[inline(never)]
    fn guard_other(&mut self, kernel: &Kernel) {
        if !self.guards.iter().rev().any(|g| kernel.guarded_by(g)) {
            self.guards.push(kernel.launch_guard());
        }
    }

    /// Keep `buffers` and `staging` alive until the batch completes (work other than launches,
    /// enqueued before the event that closes it, uses them).
    pub(crate) fn keep(&mut self, buffers: &[&DeviceBuffer], staging: Option<Arc<Pinned>>) {
        self.buffers.extend(buffers.iter().map(|b| (*b).clone()));
        self.staging.extend(staging);
    }

    /// A Completion of the batch that is no launch of its own (a fence): it resolves with the
    /// batch, and is not counted in the host's launch stats.
    pub(crate) fn completion(&self) -> Completion {
        Completion {
            cell: self.cell.clone(),
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
}

/// Complete a batch with `outcome`: release what it keeps alive, then wake its Completions,
/// then count its launches done.
pub(crate) fn complete(host: &Host, launched: Launched, outcome: &Result<()>) {
    let Launched {
        cell,
        n,
        buffers,
        staging,
        guards,
    } = launched;
    drop(buffers);
    if outcome.is_err() {
        // The batch's event was never reached: copies on its chunks may still run.
        for s in &staging {
            s.mark_unknown();
        }
    }
    drop(staging);
    drop(guards);
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

    /// The stream's host, for a poll that completes its batch itself (inline.rs); None: polls
    /// of this stream never do.
    fn host(&self) -> Option<&Arc<Host>> {
        None
    }

    /// As [`Flush::flush`], but the recorded batch is returned to the caller, who watches it
    /// (inline.rs), instead of being handed to the completion thread. None when the queue is
    /// empty, or when recording failed (the launches are then completed with the error).
    fn record_kept(&self) -> Option<Batch> {
        self.flush();
        None
    }
}

/// Count a launch (enqueued, pending) for the host's stats.
pub(crate) fn count_launch(host: &Host) {
    count_launches(host, 1);
}

/// Count `n` launches (one graph replay of `n` nodes) for the host's stats.
pub(crate) fn count_launches(host: &Host, n: usize) {
    host.counters
        .launches
        .0
        .fetch_add(n as u64, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::task::Wake;

    struct Flag(Mutex<bool>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            *self.0.lock().unwrap() = true;
        }
    }

    /// A stand-in stream: its sync point runs `on_sync`; flushes are counted.
    struct FakeStream<F: Fn() -> Result<()> + Send + Sync>(F, AtomicBool, Mutex<usize>);

    /// A stand-in stream whose polls spin for `0`.
    struct SpinningStream(Duration, AtomicBool);
    impl Flush for SpinningStream {
        fn flush(&self) {}
        fn sync_point(&self) -> Result<()> {
            Ok(())
        }
        fn activity(&self) -> (usize, u64) {
            (0, 0)
        }
        fn watched(&self) -> &AtomicBool {
            &self.1
        }
        fn await_spin(&self) -> Duration {
            self.0
        }
    }

    #[test]
    fn a_poll_with_a_spin_budget_returns_ready_without_a_wake_when_the_launch_ends_within_it() {
        let cell = Arc::new(BatchOutcome::new(Some(Arc::new(SpinningStream(
            Duration::from_secs(30),
            AtomicBool::new(false),
        )))));
        let mut c = Completion { cell: cell.clone() };
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
            cell: Arc::new(BatchOutcome::new(Some(Arc::new(SpinningStream(
                Duration::ZERO,
                AtomicBool::new(false),
            ))))),
        };
        assert!(
            Pin::new(&mut idle)
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    impl<F: Fn() -> Result<()> + Send + Sync> Flush for FakeStream<F> {
        fn flush(&self) {
            *self.2.lock().unwrap() += 1;
        }
        fn sync_point(&self) -> Result<()> {
            (self.0)()
        }
        fn activity(&self) -> (usize, u64) {
            (0, 0)
        }
        fn watched(&self) -> &AtomicBool {
            &self.1
        }
        fn await_spin(&self) -> Duration {
            Duration::ZERO
        }
    }

    /// A batch of a stand-in stream whose sync point runs `on_sync`.
    fn cell_syncing(on_sync: impl Fn() -> Result<()> + Send + Sync + 'static) -> Arc<BatchOutcome> {
        Arc::new(BatchOutcome::new(Some(Arc::new(FakeStream(
            on_sync,
            AtomicBool::new(false),
            Mutex::new(0),
        )))))
    }

    #[test]
    fn completion_future_is_woken_when_the_cell_finishes() {
        let cell = cell_syncing(|| Ok(()));
        let mut c = Completion { cell: cell.clone() };
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
        let batch = Launched::new(Some(Arc::new(FakeStream(
            || Ok(()),
            AtomicBool::new(false),
            Mutex::new(0),
        ))));
        let mut cs: Vec<Completion> = (0..3).map(|_| batch.completion()).collect();
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
        let stream = Arc::new(FakeStream(|| Ok(()), AtomicBool::new(false), Mutex::new(0)));
        let cell = Arc::new(BatchOutcome::new(Some(stream.clone())));
        let mut c = Completion { cell: cell.clone() };
        let waker = Waker::from(Arc::new(Flag(Mutex::new(false))));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        assert_eq!(*stream.2.lock().unwrap(), 1);
        cell.recorded.store(true, Ordering::Release);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        assert_eq!(
            *stream.2.lock().unwrap(),
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
        let finished = Arc::new(Mutex::new(None::<Arc<BatchOutcome>>));
        let f2 = finished.clone();
        let cell = cell_syncing(move || {
            if let Some(c) = f2.lock().unwrap().take() {
                c.finish(Err(Error::ContextLost { generation: 9 }));
            }
            Ok(())
        });
        *finished.lock().unwrap() = Some(cell.clone());
        let c = Completion { cell };
        assert!(matches!(
            c.wait(),
            Err(Error::ContextLost { generation: 9 })
        ));
    }

    #[test]
    fn blocking_wait_reports_the_sync_error_otherwise() {
        let c = Completion {
            cell: cell_syncing(|| {
                Err(Error::ContextPoisoned {
                    call: "cuEventSynchronize",
                    name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                })
            }),
        };
        assert!(matches!(c.wait(), Err(Error::ContextPoisoned { .. })));
    }

    #[test]
    fn blocking_wait_on_a_batch_without_a_stream_returns_once_another_thread_finishes_it() {
        let cell = Arc::new(BatchOutcome::new(None));
        let c = Completion { cell: cell.clone() };
        let finisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            cell.finish(Err(Error::ContextLost { generation: 6 }));
        });
        assert!(matches!(
            c.wait(),
            Err(Error::ContextLost { generation: 6 })
        ));
        finisher.join().unwrap();
    }
}
