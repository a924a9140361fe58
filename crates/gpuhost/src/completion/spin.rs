//! Spinning before parking: how long a poll of an unfinished launch watches it before it returns
//! Pending (the host's budget), and what it watches — the outcome slot, or, for the poll that
//! recorded the batch, the batch's event itself (see the parent module's header for why).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Batch, BatchOutcome, complete, hand_over, poll_batch};
use crate::host::Host;

/// A batch recorded by a poll that keeps it ([`Flush::record_owned`]): the completion thread
/// does not know of it until [`Owned::spin`] hands it over, so nobody else queries its event.
pub(crate) struct Owned {
    pub(crate) host: Arc<Host>,
    pub(crate) batch: Batch,
}

/// Event queries between two yields of an owning poll (each is a driver call of ~0.1–0.5 µs).
const QUERIES_PER_YIELD: u32 = 8;

impl Owned {
    /// Queries the batch's event for up to `budget`, and completes the batch once it has
    /// finished; otherwise hands it to the completion thread (which then wakes the Completions'
    /// wakers as for any batch). Either way the batch is moved exactly once, so it cannot
    /// complete twice nor be lost.
    pub(super) fn spin(self, budget: Duration) {
        let Owned { host, batch } = self;
        let start = Instant::now();
        // Entered each round: a context lost meanwhile is seen as the completion thread would
        // see it (the generation check in `poll_batch`). One that cannot be bound here ends the
        // spin: the completion thread retries, and reports.
        while let Ok(generation) = host.enter() {
            for _ in 0..QUERIES_PER_YIELD {
                if let Some(outcome) = poll_batch(&host, &batch, generation) {
                    complete(&host, batch.launches, &outcome);
                    return;
                }
                if start.elapsed() >= budget {
                    hand_over(&host, batch);
                    return;
                }
                std::hint::spin_loop();
            }
            // As in `spin_until_finished`: a software driver's worker may need this core.
            std::thread::yield_now();
        }
        hand_over(&host, batch);
    }
}

/// Watches `cell` for up to `budget`; true once it finished. Between short bursts of looks it
/// yields the core: where cores are scarce, the completion thread (or a software driver's
/// worker) that would finish the launch may need this very one; where they are not, a yield
/// returns at once.
pub(super) fn spin_until_finished(cell: &BatchOutcome, budget: Duration) -> bool {
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
