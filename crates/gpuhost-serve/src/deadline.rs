//! Request deadlines without a tokio timer per request.
//!
//! A `tokio::time::timeout_at` around a guest's run registers a timer in the runtime's wheel as
//! soon as the guest's first await is pending. When no earlier timer is pending (the usual case
//! for a server whose requests end well inside their limits), tokio then wakes its parked I/O
//! driver so that epoll re-arms with the new timeout: an eventfd write on the request's worker
//! and a worker woken for nothing, per request. The native handler pays neither. (Measured with
//! `scripts/probes/serve-perf.sh` on softcuda: tokio's and hyper's CPU per request 95 → 75 µs
//! under perf; on the H200 serve's throughput moved less than the spread between rounds,
//! bench/RESULTS.md, session 22.)
//!
//! Instead, a request's deadline goes on its server's list ([`Deadlines::start`]), and one task
//! walks the list every [`TICK`], ending the requests past theirs ([`Deadline::bound`] sees the
//! flag and its waker is woken). Starting a deadline is a push under a lock no one holds for
//! long; a request's end is the drop of an `Arc`, which the next walk notices. A request is
//! stopped between 0 and one [`TICK`] after its deadline. The walker stops ticking after
//! [`LINGER`] without requests and the next request wakes it; a walker dropped with its
//! runtime is started again by the next request in another, and one whose server is dropped ends.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

/// How often the walker looks at the list: the most a request runs past its deadline.
const TICK: Duration = Duration::from_millis(5);
/// How long the walker keeps ticking after its list was last non-empty.
const LINGER: Duration = Duration::from_secs(1);

/// The walker's state (the `walker` field of [`Shared`]).
const NOT_RUNNING: u8 = 0;
const TICKING: u8 = 1;
const PARKED: u8 = 2;

/// A server's request deadlines and the task that enforces them.
pub(crate) struct Deadlines {
    shared: Arc<Shared>,
}

struct Shared {
    /// Every started deadline not yet seen ended or past by a walk.
    entries: Mutex<Vec<Arc<Entry>>>,
    /// [`NOT_RUNNING`], [`TICKING`] or [`PARKED`].
    walker: AtomicU8,
    /// Wakes a parked walker.
    unpark: Notify,
    /// Set when the [`Deadlines`] is dropped: the walker ends.
    closed: AtomicBool,
    tick: Duration,
    linger: Duration,
}

/// One request's deadline.
struct Entry {
    at: Instant,
    expired: AtomicBool,
    /// The task awaiting [`Deadline::bound`], woken when the deadline passes.
    waker: AtomicWaker,
}

/// A request's deadline, from [`Deadlines::start`]. Dropping it (and every future
/// [`Deadline::bound`] made) ends the request's place on the list.
pub(crate) struct Deadline(Arc<Entry>);

/// A future bounded by [`Deadline::bound`] did not finish before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl Default for Deadlines {
    fn default() -> Self {
        Self::with_timing(TICK, LINGER)
    }
}

impl Deadlines {
    fn with_timing(tick: Duration, linger: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                entries: Mutex::new(Vec::new()),
                walker: AtomicU8::new(NOT_RUNNING),
                unpark: Notify::new(),
                closed: AtomicBool::new(false),
                tick,
                linger,
            }),
        }
    }

    /// A deadline at `at`, enforced from now on. Call it inside a tokio runtime with time
    /// enabled (the walker is spawned on the current one); outside one the deadline is never
    /// enforced.
    pub(crate) fn start(&self, at: Instant) -> Deadline {
        let entry = Arc::new(Entry {
            at,
            expired: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        self.shared.lock().push(entry.clone());
        // After the push: a walker that parks from now on finds the entry (see `walk_loop`).
        match self.shared.walker.load(Ordering::SeqCst) {
            TICKING => {}
            PARKED => {
                if self
                    .shared
                    .walker
                    .compare_exchange(PARKED, TICKING, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    self.shared.unpark.notify_one();
                }
            }
            _ => self.spawn_walker(),
        }
        Deadline(entry)
    }

    fn spawn_walker(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self
            .shared
            .walker
            .compare_exchange(NOT_RUNNING, TICKING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let running = Running(self.shared.clone());
            drop(rt.spawn(walk_loop(running)));
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Entry>>> {
        // The list stays whole whatever panicked while holding it: every change is one push or
        // one `retain`.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the deadlines past `now`, forgets those whose request has ended; true if any are
    /// left.
    fn walk(&self, now: Instant) -> bool {
        let mut entries = self.lock();
        entries.retain(|e| {
            // Only the list holds it: the request dropped its `Deadline` and bounded futures.
            if Arc::strong_count(e) == 1 {
                return false;
            }
            if e.at <= now {
                e.expired.store(true, Ordering::Release);
                e.waker.wake();
                return false;
            }
            true
        });
        !entries.is_empty()
    }
}

/// The walker's hold on its list; marks the walker not running when dropped, so that a walker
/// dropped with its runtime is spawned again by the next request.
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.walker.store(NOT_RUNNING, Ordering::SeqCst);
    }
}

impl Drop for Deadlines {
    fn drop(&mut self) {
        // Its walker ends at its next wake: woken now if parked.
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.unpark.notify_one();
    }
}

/// Walks the list every tick while there are requests, parks after `linger` without any, and
/// ends with its server's [`Deadlines`].
async fn walk_loop(running: Running) {
    let shared = &running.0;
    let mut busy_at = Instant::now();
    while !shared.closed.load(Ordering::SeqCst) {
        tokio::time::sleep(shared.tick).await;
        let now = Instant::now();
        if shared.walk(now) {
            busy_at = now;
            continue;
        }
        if now.duration_since(busy_at) < shared.linger {
            continue;
        }
        shared.walker.store(PARKED, Ordering::SeqCst);
        // A request that pushed before the store above but saw TICKING did not wake us: look
        // again. One that sees PARKED sets TICKING and leaves a permit in `unpark`.
        if !shared.lock().is_empty()
            && shared
                .walker
                .compare_exchange(PARKED, TICKING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            continue;
        }
        shared.unpark.notified().await;
        busy_at = Instant::now();
    }
}

impl Deadline {
    /// Runs `f` until it finishes (`Ok`) or the deadline passes first (`Err(Elapsed)`). As
    /// tokio's `timeout_at`, a future ready at the poll that sees the deadline passed wins.
    pub(crate) fn bound<F: Future>(
        &self,
        f: F,
    ) -> impl Future<Output = Result<F::Output, Elapsed>> + use<F> {
        let entry = self.0.clone();
        async move {
            let mut f = pin!(f);
            std::future::poll_fn(|cx| {
                if let Poll::Ready(v) = f.as_mut().poll(cx) {
                    return Poll::Ready(Ok(v));
                }
                entry.waker.register(cx.waker());
                // After registering: a walk that expired the entry before it also woke nothing.
                if entry.expired.load(Ordering::Acquire) {
                    Poll::Ready(Err(Elapsed))
                } else {
                    Poll::Pending
                }
            })
            .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(d: &Deadlines) -> usize {
        d.shared.lock().len()
    }

    #[tokio::test]
    async fn a_future_still_pending_at_its_deadline_ends_elapsed_no_earlier() {
        let deadlines = Deadlines::default();
        let start = Instant::now();
        let d = deadlines.start(start + Duration::from_millis(30));
        let r = d.bound(std::future::pending::<()>()).await;
        assert_eq!(r, Err(Elapsed));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[tokio::test]
    async fn a_future_that_finishes_first_gives_its_output() {
        let deadlines = Deadlines::default();
        let d = deadlines.start(Instant::now() + Duration::from_secs(60));
        let r = d
            .bound(async {
                tokio::task::yield_now().await;
                7
            })
            .await;
        assert_eq!(r, Ok(7));
    }

    #[tokio::test]
    async fn an_ended_requests_deadline_leaves_the_list_at_the_next_walk() {
        let deadlines = Deadlines::default();
        let kept = deadlines.start(Instant::now() + Duration::from_secs(60));
        drop(deadlines.start(Instant::now() + Duration::from_secs(60)));
        assert_eq!(entries(&deadlines), 2);
        tokio::time::sleep(TICK * 4).await;
        assert_eq!(entries(&deadlines), 1, "the ended request's entry stayed");
        drop(kept);
    }

    #[tokio::test]
    async fn a_parked_walker_is_woken_by_the_next_request() {
        let deadlines = Deadlines::with_timing(Duration::from_millis(2), Duration::from_millis(5));
        drop(deadlines.start(Instant::now()));
        let parked = async {
            while deadlines.shared.walker.load(Ordering::SeqCst) != PARKED {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), parked)
            .await
            .expect("the walker never parked");
        let d = deadlines.start(Instant::now() + Duration::from_millis(10));
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            d.bound(std::future::pending::<()>()),
        )
        .await;
        assert_eq!(
            r,
            Ok(Err(Elapsed)),
            "the parked walker did not end the deadline"
        );
    }

    #[tokio::test]
    async fn a_dropped_servers_walker_ends_parked_or_not() {
        for linger in [Duration::from_secs(60), Duration::ZERO] {
            let deadlines = Deadlines::with_timing(Duration::from_millis(2), linger);
            drop(deadlines.start(Instant::now()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let shared = deadlines.shared.clone();
            drop(deadlines);
            let ended = async {
                while Arc::strong_count(&shared) > 1 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(30), ended)
                .await
                .unwrap_or_else(|_| panic!("the walker (linger {linger:?}) outlived its server"));
            assert_eq!(shared.walker.load(Ordering::SeqCst), NOT_RUNNING);
        }
    }

    #[test]
    fn a_walker_dropped_with_its_runtime_starts_again_in_the_next() {
        let deadlines = Deadlines::default();
        let run = |deadlines: &Deadlines| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(async {
                let d = deadlines.start(Instant::now() + Duration::from_millis(10));
                tokio::time::timeout(
                    Duration::from_secs(30),
                    d.bound(std::future::pending::<()>()),
                )
                .await
            })
        };
        assert_eq!(run(&deadlines), Ok(Err(Elapsed)));
        assert_eq!(
            deadlines.shared.walker.load(Ordering::SeqCst),
            NOT_RUNNING,
            "the runtime's end did not mark the walker gone"
        );
        assert_eq!(run(&deadlines), Ok(Err(Elapsed)));
    }
}
