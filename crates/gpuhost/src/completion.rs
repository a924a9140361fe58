//! Launch completion: one dedicated thread per host polls the events recorded after pending
//! launches and wakes their `Completion` (a Future, or a blocking `wait`).
//!
//! The thread spins (yielding) while work is pending, for low completion latency, and parks on a
//! condvar when idle. Executor threads never block; there is no spawn_blocking per launch.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
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
    state: Mutex<CellState>,
    done: Condvar,
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
            s.waker.take()
        };
        self.done.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The completion of one launch: `.await` it, or `wait()` from non-async code. Dropping it does
/// not cancel the launch (the GPU work and what it keeps alive complete regardless).
#[must_use = "a launch's errors arrive through its Completion"]
pub struct Completion {
    cell: Arc<Cell>,
}

impl Completion {
    /// Block the calling thread until the launch completes.
    pub fn wait(self) -> Result<()> {
        let mut s = self.cell.state.lock().unwrap_or_else(|p| p.into_inner());
        while !s.finished {
            s = self.cell.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.result.take().unwrap_or(Ok(()))
    }

    /// True once the launch has completed (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .finished
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

/// One launch in flight: its event and what it keeps alive until the GPU is done with it.
struct Pending {
    event: CUevent,
    generation: u64,
    cell: Arc<Cell>,
    _keep: Box<dyn Any + Send>,
}

// SAFETY: CUevent is a driver handle usable from any thread with the context bound; the
// completion thread binds it before querying.
unsafe impl Send for Pending {}

/// The per-host completion thread's queue.
pub(crate) struct Completer {
    queue: Arc<(Mutex<Vec<Pending>>, Condvar)>,
}

impl Completer {
    fn start(host: Arc<Host>) -> Self {
        let queue: Arc<(Mutex<Vec<Pending>>, Condvar)> = Arc::default();
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

/// Register a launch whose completion is marked by `event` (already recorded on its stream).
pub(crate) fn submit(
    host: &Arc<Host>,
    event: CUevent,
    generation: u64,
    keep: Box<dyn Any + Send>,
) -> Completion {
    let cell = Arc::new(Cell::default());
    let completer = host
        .completer
        .get_or_init(|| Completer::start(host.clone()));
    Counters::inc(&host.counters.pending_launches);
    Counters::inc(&host.counters.launches);
    let (lock, cv) = &*completer.queue;
    lock.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Pending {
            event,
            generation,
            cell: cell.clone(),
            _keep: keep,
        });
    cv.notify_one();
    Completion { cell }
}

/// How long the thread spins (yielding) with work pending before it starts sleeping briefly.
const SPIN_ROUNDS: u32 = 20_000;
const BACKOFF: Duration = Duration::from_micros(50);

fn run(host: Arc<Host>, queue: Arc<(Mutex<Vec<Pending>>, Condvar)>) {
    let (lock, cv) = &*queue;
    let mut local: Vec<Pending> = Vec::new();
    let mut idle_rounds = 0u32;
    loop {
        {
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            while q.is_empty() && local.is_empty() {
                q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            local.append(&mut q);
        }
        let generation = match host.enter() {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!("completion thread cannot bind the context: {e}");
                std::thread::sleep(BACKOFF);
                continue;
            }
        };
        let before = local.len();
        local.retain_mut(|p| poll_one(&host, p, generation));
        if local.len() < before {
            idle_rounds = 0;
        } else {
            idle_rounds = idle_rounds.saturating_add(1);
        }
        if !local.is_empty() {
            if idle_rounds < SPIN_ROUNDS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(BACKOFF);
            }
        }
    }
}

/// Query one pending launch; false when it is finished (and has been completed).
fn poll_one(host: &Host, p: &mut Pending, generation: u64) -> bool {
    let outcome = if p.generation != generation {
        Err(Error::ContextLost { generation })
    } else {
        // SAFETY: the event belongs to the current context (same generation), which is bound.
        let r = unsafe { sys::cuEventQuery(p.event) };
        if r == CUresult::CUDA_ERROR_NOT_READY {
            return true;
        }
        let res = host.classify("cuEventQuery", r);
        if res.is_ok() {
            host.return_event(p.generation, p.event, false);
        }
        res
    };
    Counters::dec(&host.counters.pending_launches);
    p.cell.finish(outcome);
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

    #[test]
    fn completion_future_is_woken_when_the_cell_finishes() {
        let cell = Arc::new(Cell::default());
        let mut c = Completion { cell: cell.clone() };
        let flag = Arc::new(Flag(Mutex::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        cell.finish(Err(Error::ContextLost { generation: 3 }));
        assert!(*flag.0.lock().unwrap());
        match Pin::new(&mut c).poll(&mut cx) {
            Poll::Ready(Err(Error::ContextLost { generation: 3 })) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn blocking_wait_returns_the_result_from_another_thread() {
        let cell = Arc::new(Cell::default());
        let c = Completion { cell: cell.clone() };
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            cell.finish(Ok(()));
        });
        assert!(c.wait().is_ok());
        t.join().unwrap();
    }
}
