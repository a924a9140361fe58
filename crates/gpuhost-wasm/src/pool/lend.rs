//! How a guest gets its pair from a [`SandboxPool`]: a reset pair when one is ready; else, for
//! a guest that can wait on a task ([`SandboxPool::confinement_waiting`], `gpuhost serve`'s
//! warm Stores), the oldest pair whose zeroing is queued, or, once the pool has lent and holds
//! its bound of pairs, the next one the resetter brings back; else a new pair.
//!
//! Why wait rather than make: a new pair is the costliest thing a sandboxed guest does on the
//! host (an arena's reserve, create, map, access and zeroing, and a control block: hundreds of
//! µs on the H200, serialized in the driver with every other thread's calls), and each one made
//! past the bound is freed again by the resetter (an unmap and a free each), which then resets
//! the others later still, so more guests miss. On the H200 that fed itself: with 16
//! connections on a function that launches, 69% of requests made a pair, each request spent
//! 4.6 ms getting one, 6467 pairs were pending and serve fell to 1–3k req/s from 60–90k
//! (bench/h200-runs/2026-12-03-s23/ladder-diag/). A queued zeroing is a memset of at most
//! [`super::MAX_KEPT_MAPPED`] on the pool's own stream: microseconds.
//!
//! A guest waits about [`MAX_WAIT`] at most for pairs that their last guests still hold (a pair
//! the last guest's long kernel still holds comes back only when the kernel ends), longer only
//! at the bound while some pair is free for the resetter or being reset (its next passes bring
//! it back; [`SandboxPool::next`] says why), and never when no pass of the resetter will come:
//! its thread did not start, or the pool holds no pair it is bringing back.
//! The wait is measured at the resetter's passes, which wake the waiters (every 1 ms while pairs
//! are on their way back), not by a timer: this crate does not require the embedder's runtime
//! to have one. A pass that itself waits in the driver (behind a kernel the watchdog has yet to
//! stop) so lengthens the wait; a guest that made a pair instead would have waited in the
//! driver as long.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gpuhost::{Arena, ArenaReset, ControlBlock};

use super::{SURGE, SandboxPool, resetter};
use crate::confine::Confinement;
use crate::limits::Limits;

/// How long a guest waits for a pair on its way back before making one (checked at each of the
/// resetter's passes).
pub const MAX_WAIT: Duration = Duration::from_millis(10);

/// A pair lent to a guest and not yet given back (or dropped): counted in the pool's `lent`
/// while this lives, so the pool knows how many pairs exist.
pub(crate) struct Lent {
    pub(crate) pool: Arc<SandboxPool>,
}

impl Lent {
    pub(super) fn new(pool: &Arc<SandboxPool>) -> Self {
        pool.lent.fetch_add(1, Ordering::SeqCst);
        Self { pool: pool.clone() }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.pool.lent.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a guest gets next, decided under the pool's lock.
pub(super) enum Next {
    /// A pair whose zeroing completed.
    Ready(ArenaReset, ControlBlock),
    /// The oldest pair whose zeroing is queued and not yet seen done.
    Queued(ArenaReset, ControlBlock),
    /// A pair on its way back (waiting for its guest to let go, or being reset): wait for the
    /// resetter's next pass.
    Wait,
    /// A new pair.
    Make,
}

impl SandboxPool {
    /// A guest's confinement, without waiting: a reset pair, else a new one.
    pub(crate) fn confinement(
        self: &Arc<Self>,
        limits: &Limits,
    ) -> Result<Confinement, gpuhost::Error> {
        let lent = Lent::new(self);
        let (arena, ctl) = match self.take() {
            Some(pair) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                pair
            }
            None => self.make()?,
        };
        Confinement::from_parts(arena, ctl, limits, Some(lent))
    }

    /// A guest's confinement, awaited without blocking the thread: a reset pair; else the
    /// oldest one being zeroed, or, once the pool has lent and holds its bound, the next one
    /// the resetter brings back (for up to [`MAX_WAIT`]); else a new one.
    pub(crate) async fn confinement_waiting(
        self: &Arc<Self>,
        limits: &Limits,
    ) -> Result<Confinement, gpuhost::Error> {
        let lent = Lent::new(self);
        let start = Instant::now();
        let mut waited = false;
        let (arena, ctl) = loop {
            // Enabled before the pool is looked at: a pass that ends after the look wakes it.
            let pass = self.back.notified();
            let mut pass = std::pin::pin!(pass);
            pass.as_mut().enable();
            let patient = start.elapsed() < MAX_WAIT;
            match self.next(patient) {
                Next::Ready(reset, ctl) => {
                    if let Some(arena) = handed_out(reset) {
                        break (arena, ctl);
                    }
                }
                Next::Queued(reset, ctl) => {
                    waited = true;
                    // An error frees the pair, never handing it out.
                    if let Ok(arena) = reset.zeroed().await {
                        break (arena, ctl);
                    }
                }
                Next::Wait => {
                    waited = true;
                    pass.await;
                }
                Next::Make => break self.make()?,
            }
        };
        if waited {
            self.waited.fetch_add(1, Ordering::Relaxed);
        } else {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        Confinement::from_parts(arena, ctl, limits, Some(lent))
    }

    /// A new pair, counted: hundreds of µs in the driver, serialized with every other thread's
    /// calls, so made off the executor's worker (blocking.rs).
    fn make(&self) -> Result<(Arc<Arena>, ControlBlock), gpuhost::Error> {
        let (arena, ctl) = crate::blocking::off_worker(|| {
            let arena = self.host.arena(self.arena_bytes)?;
            Ok::<_, gpuhost::Error>((arena, self.host.control_block()?))
        })?;
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok((arena, ctl))
    }

    /// What a guest that may wait (`patient`) gets next. Pairs being zeroed are awaited rather
    /// than a pair made; pairs on their way back are waited for once the pool has lent and holds
    /// its bound (the caller's own loan counted), unless no pass of the resetter will come.
    ///
    /// A guest past its wait makes a pair, except at the bound while the resetter is only behind:
    /// some pair is being reset, or is free for its next pass (no guest holds it). Those come
    /// back within a pass or two; a pair made then is one past the bound, freed again by the
    /// resetter (an unmap and a free, 150–250 µs on the H200), which puts it further behind, so
    /// more guests wait out their wait and make pairs. On the H200 that loop took serve from
    /// 115k to 38k requests a second at 64 connections, with 7061 pairs pending
    /// (bench/h200-runs/2026-12-03-s25/). Only pairs that their last guests' launches still
    /// hold, which may run for long, are not waited for past [`MAX_WAIT`].
    pub(super) fn next(&self, patient: bool) -> Next {
        self.used_now();
        let mut st = self.lock();
        if let Some((reset, ctl)) = ready(&mut st) {
            return Next::Ready(reset, ctl);
        }
        let coming = st.held.len() + st.moving;
        let exist = coming + st.resetting.len() + self.lent.load(Ordering::SeqCst);
        let at_bound = exist > self.kept * SURGE && resetter::running();
        if !patient {
            let behind = !st.resetting.is_empty()
                || st.moving > 0
                || st.held.iter().any(super::Given::is_free);
            if !(at_bound && behind) {
                return Next::Make;
            }
        }
        if let Some((reset, ctl)) = st.resetting.pop_front() {
            return Next::Queued(reset, ctl);
        }
        if coming > 0 && at_bound {
            Next::Wait
        } else {
            Next::Make
        }
    }

    /// The oldest pair whose zeroing has completed, without waiting and without a driver call;
    /// failed ones are freed (they hold no device work any more).
    pub(super) fn take(&self) -> Option<(Arc<Arena>, ControlBlock)> {
        loop {
            self.used_now();
            let (reset, ctl) = ready(&mut self.lock())?;
            if let Some(arena) = handed_out(reset) {
                return Some((arena, ctl));
            }
        }
    }
}

/// The oldest pair whose zeroing has completed, out of the pool's lists.
fn ready(st: &mut super::Kept) -> Option<(ArenaReset, ControlBlock)> {
    let i = st.resetting.iter().position(|(r, _)| r.is_done())?;
    st.resetting.remove(i)
}

/// The arena of a pair [`SandboxPool::next`] found ready; None when its zeroing failed or its
/// context is gone (it is freed with its block, never handed out).
fn handed_out(reset: ArenaReset) -> Option<Arc<Arena>> {
    match reset.ready() {
        Ok(Ok(arena)) => Some(arena),
        Ok(Err(_)) => None,
        // Never: it was seen done (freed, in case).
        Err(_) => None,
    }
}
