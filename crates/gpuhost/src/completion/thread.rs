//! The per-host completion thread: it queries recorded batches' events (cuEventQuery) and
//! completes them, and records the events of watched streams that went idle. Handing it work
//! costs a futex wake only when it is parked (see the module above for who records what).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUresult;

use super::{Batch, Flush, complete};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::result;

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
    /// The permit for one poll at a time to query its own batch's event (see inline.rs), on its
    /// own cache line: polls touch it, launching threads and this thread do not.
    inline: InlineFlag,
}

#[derive(Default)]
#[repr(align(128))]
struct InlineFlag(AtomicBool);

impl Shared {
    fn start(host: Arc<Host>) -> Arc<Self> {
        let me = Arc::new(Self {
            inbox: Mutex::default(),
            news: AtomicBool::new(false),
            cv: Condvar::new(),
            inline: InlineFlag::default(),
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

/// The host's permit flag for a poll that queries its own batch (see inline.rs).
pub(super) fn inline_flag(host: &Arc<Host>) -> &AtomicBool {
    &completer(host).inline.0
}

/// The host's handle on its completion thread (started on first use).
pub(crate) struct Completer(Arc<Shared>);

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
pub(super) fn poll_batch(host: &Host, b: &Batch, generation: u64) -> Option<Result<()>> {
    let outcome = if b.generation != generation {
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
        if res.is_ok() {
            host.return_event(b.generation, b.event, false);
        }
        res
    };
    Some(outcome)
}
