//! Launch completion: one dedicated thread per host polls the events recorded after pending
//! launches and wakes their `Completion` (a Future, or a blocking `wait`).
//!
//! The thread spins (yielding) while work is pending, for low completion latency, and parks on a
//! condvar when idle. Executor threads never block; there is no spawn_blocking per launch.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cudarc::driver::sys::{self, CUevent, CUresult};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::stats::Counters;

/// The outcome slot shared by a launch and the completion thread.
#[derive(Default)]
struct Cell {
    /// Set (Release) after the result is stored: the lock-free fast path of `wait`/`is_done`.
    finished: AtomicBool,
    state: Mutex<CellState>,
}

#[derive(Default)]
struct CellState {
    result: Option<Result<()>>,
    finished: bool,
    waker: Option<Waker>,
}

impl Cell {
    fn finish(&self, result: Result<()>) {
        let waker = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.result = Some(result);
            s.finished = true;
            self.finished.store(true, Ordering::Release);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn take(&self) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.result.take().unwrap_or(Ok(()))
    }
}

/// The completion of one launch: `.await` it, or `wait()` from non-async code. Dropping it does
/// not cancel the launch (the GPU work and what it keeps alive complete regardless).
#[must_use = "a launch's errors arrive through its Completion"]
pub struct Completion {
    cell: Arc<Cell>,
    stream: Arc<dyn Flush>,
}

impl Completion {
    /// Block the calling thread until the launch completes. The caller records its own event
    /// after the launch and synchronizes on it (as cuStreamSynchronize would), instead of
    /// waiting for the completion thread's hand-off.
    pub fn wait(self) -> Result<()> {
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.take();
        }
        let synced = self.stream.sync_point();
        if self.cell.finished.load(Ordering::Acquire) {
            return self.cell.take();
        }
        synced
    }

    /// True once the launch has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell.finished.load(Ordering::Acquire)
    }
}

impl Future for Completion {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut s = self.cell.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.finished {
            return Poll::Ready(s.result.take().unwrap_or(Ok(())));
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A launch enqueued on a stream whose completion event is not recorded yet.
pub(crate) struct Launched {
    cell: Arc<Cell>,
    _keep: Box<dyn Any + Send>,
}

impl Launched {
    /// A new launch's completion slot, keeping `keep` alive until it completes.
    pub(crate) fn new(keep: Box<dyn Any + Send>, stream: Arc<dyn Flush>) -> (Self, Completion) {
        let cell = Arc::new(Cell::default());
        (
            Self {
                cell: cell.clone(),
                _keep: keep,
            },
            Completion { cell, stream },
        )
    }

    /// Complete without the GPU (the launch's context is gone).
    pub(crate) fn fail(self, e: Error) {
        self.cell.finish(Err(e));
    }
}

/// Launches covered by one recorded event: all complete when it does.
pub(crate) struct Batch {
    pub(crate) event: CUevent,
    pub(crate) generation: u64,
    pub(crate) launches: Vec<Launched>,
}

// SAFETY: CUevent is a driver handle usable from any thread with its context bound; the
// completion thread binds it before querying.
unsafe impl Send for Batch {}

/// Something with launches whose completion events are not recorded yet (a stream).
pub(crate) trait Flush: Send + Sync {
    /// Record an event after the unrecorded launches and hand them over as a batch.
    fn flush(&self) -> Option<Batch>;

    /// Block until everything enqueued so far has finished (for a blocking wait).
    fn sync_point(&self) -> Result<()>;

    /// How many launches wait for an event.
    fn queued(&self) -> usize;
}

#[derive(Default)]
struct Queue {
    dirty: Vec<Arc<dyn Flush>>,
    sleeping: bool,
}

/// The per-host completion thread's inbox.
pub(crate) struct Completer {
    queue: Arc<(Mutex<Queue>, Condvar)>,
}

impl Completer {
    fn start(host: Arc<Host>) -> Self {
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let q = queue.clone();
        let ordinal = host.ordinal();
        let spawned = std::thread::Builder::new()
            .name(format!("gpuhost-complete-{ordinal}"))
            .spawn(move || run(host, q));
        if let Err(e) = spawned {
            // Without the thread nothing completes; waiting callers would hang, so say so loudly.
            tracing::error!("cannot start the gpuhost completion thread: {e}");
        }
        Self { queue }
    }
}

/// Count a launch (enqueued, pending) for the host's stats.
pub(crate) fn count_launch(host: &Host) {
    Counters::inc(&host.counters.pending_launches);
    Counters::inc(&host.counters.launches);
}

/// Tell the completion thread that `stream` has unrecorded launches. The event is recorded by
/// that thread, off the launching thread's path; it may cover later launches too, which only
/// makes a completion conservative, never early.
pub(crate) fn mark_dirty(host: &Arc<Host>, stream: Arc<dyn Flush>) {
    let completer = host
        .completer
        .get_or_init(|| Completer::start(host.clone()));
    let (lock, cv) = &*completer.queue;
    let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
    q.dirty.push(stream);
    // Waking costs a syscall: only when the thread is really parked.
    if q.sleeping {
        q.sleeping = false;
        cv.notify_one();
    }
}

/// Passes with nothing finishing before the thread backs off to short sleeps (work pending) or
/// parks (no work).
const SPIN_ROUNDS: u32 = 20_000;
const IDLE_SPIN_ROUNDS: u32 = 2_000;
const BACKOFF: Duration = Duration::from_micros(50);

/// A stream's queue is flushed once it stops growing between two passes (a burst has ended) or
/// reaches this size: one event per burst, and no event recording contending with a launching
/// thread in the middle of its burst.
const MAX_UNRECORDED: usize = 256;

fn run(host: Arc<Host>, queue: Arc<(Mutex<Queue>, Condvar)>) {
    let (lock, cv) = &*queue;
    let mut pending: Vec<Batch> = Vec::new();
    let mut dirty: Vec<Arc<dyn Flush>> = Vec::new();
    // Dirty streams being watched, with their queue length at the previous pass.
    let mut watched: Vec<(Arc<dyn Flush>, usize)> = Vec::new();
    let mut quiet_rounds = 0u32;
    loop {
        {
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            let idle = q.dirty.is_empty() && pending.is_empty() && watched.is_empty();
            if idle && quiet_rounds >= IDLE_SPIN_ROUNDS {
                q.sleeping = true;
                while q.sleeping && q.dirty.is_empty() {
                    q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
                }
                q.sleeping = false;
                quiet_rounds = 0;
            }
            std::mem::swap(&mut dirty, &mut q.dirty);
        }
        let mut progressed = !dirty.is_empty();
        watched.extend(dirty.drain(..).map(|s| (s, 0)));
        watched.retain_mut(|(s, seen)| {
            let n = s.queued();
            if n == 0 {
                return false;
            }
            if n == *seen || n >= MAX_UNRECORDED {
                if let Some(b) = s.flush() {
                    pending.push(b);
                }
                progressed = true;
                return false;
            }
            *seen = n;
            true
        });
        if !pending.is_empty() {
            match host.enter() {
                Ok(generation) => {
                    let before = pending.len();
                    pending.retain_mut(|b| poll_batch(&host, b, generation));
                    progressed |= pending.len() < before;
                }
                Err(e) => {
                    tracing::warn!("completion thread cannot bind the context: {e}");
                    std::thread::sleep(BACKOFF);
                }
            }
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

/// Query one batch; false when it is finished (and its launches completed).
fn poll_batch(host: &Host, b: &mut Batch, generation: u64) -> bool {
    let outcome = if b.generation != generation {
        // Forget the dead context's event (never destroy it: its value may be reused).
        host.return_event(b.generation, b.event, false);
        Err(Error::ContextLost { generation })
    } else {
        // SAFETY: the event belongs to the current context (same generation), which is bound.
        let r = unsafe { sys::cuEventQuery(b.event) };
        if r == CUresult::CUDA_ERROR_NOT_READY {
            return true;
        }
        let res = host.classify("cuEventQuery", r);
        if res.is_ok() {
            host.return_event(b.generation, b.event, false);
        }
        res
    };
    for l in b.launches.drain(..) {
        Counters::dec(&host.counters.pending_launches);
        l.cell.finish(outcome.clone());
    }
    false
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

    /// A stand-in stream: its sync point runs `on_sync`.
    struct FakeStream<F: Fn() -> Result<()> + Send + Sync>(F);
    impl<F: Fn() -> Result<()> + Send + Sync> Flush for FakeStream<F> {
        fn flush(&self) -> Option<Batch> {
            None
        }
        fn sync_point(&self) -> Result<()> {
            (self.0)()
        }
        fn queued(&self) -> usize {
            0
        }
    }

    fn completion(
        cell: &Arc<Cell>,
        on_sync: impl Fn() -> Result<()> + Send + Sync + 'static,
    ) -> Completion {
        Completion {
            cell: cell.clone(),
            stream: Arc::new(FakeStream(on_sync)),
        }
    }

    #[test]
    fn completion_future_is_woken_when_the_cell_finishes() {
        let cell = Arc::new(Cell::default());
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
    fn blocking_wait_reports_the_completion_threads_result_when_it_came_first() {
        let cell = Arc::new(Cell::default());
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
        let cell = Arc::new(Cell::default());
        let c = completion(&cell, || {
            Err(Error::ContextPoisoned {
                call: "cuEventSynchronize",
                name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            })
        });
        assert!(matches!(c.wait(), Err(Error::ContextPoisoned { .. })));
    }
}
