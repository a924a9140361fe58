//! Completing a batch on the thread that awaits it. A poll that finds its launch's batch still
//! unrecorded records the batch's event itself (as every first poll does) but keeps the batch:
//! for its spin budget it queries the event on its own thread, and a batch that ends within the
//! budget is completed right there, as `Completion::wait` completes one. Only a batch still
//! running when the budget is spent goes to the completion thread.
//!
//! Why: `.await` otherwise pays the cross-thread hand-off. On the H200 (session 11's
//! `launch_probe`) raw launch + sync took 8.02 µs, `wait()` 8.56, another thread query-looping
//! the event and raising a flag 8.66–8.81, and `.await` through the completion thread 10.17.
//!
//! Only one poll per host queries at a time; the others watch the outcome slot as before. When
//! every spinning executor thread queried its own event (3d3c6e3, reverted) they contended in
//! the driver: launch → `.await` got slower and the parallel gpuhost-wasm suite stalled. One
//! querying poll beside the completion thread is what the raw query loop above measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::thread::{self, poll_batch};
use super::{BatchOutcome, Flush, complete};
use crate::host::Host;

/// Queries per yield of the core while watching: where cores are scarce (softcuda's worker, the
/// completion thread) the work that ends the batch may need this one.
const QUERIES_PER_YIELD: u32 = 8;

/// What a poll's attempt to complete its own batch came to.
pub(super) enum Inline {
    /// The batch completed here: the outcome slot is finished.
    Done,
    /// The budget ran out first; the batch went to the completion thread.
    HandedOver,
    /// Not tried (another poll holds the host's slot, no budget, or the queue was already
    /// recorded by someone else); the caller flushes as usual.
    NotTried,
}

/// The host's one permit to query events from a poll (see the module header).
pub(super) struct Permit<'a>(&'a AtomicBool);

impl<'a> Permit<'a> {
    pub(super) fn acquire(flag: &'a AtomicBool) -> Option<Self> {
        // A plain load first keeps a busy flag's line shared among the polls that find it taken.
        if flag.load(Ordering::Relaxed) || flag.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(Self(flag))
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Try to record and complete `cell`'s batch on this thread within `budget`.
pub(super) fn complete_here(
    cell: &Arc<BatchOutcome>,
    stream: &dyn Flush,
    budget: Duration,
) -> Inline {
    if budget.is_zero() {
        return Inline::NotTried;
    }
    let Some(host) = stream.host() else {
        return Inline::NotTried;
    };
    let Some(_permit) = Permit::acquire(thread::inline_flag(host)) else {
        return Inline::NotTried;
    };
    let Some(batch) = stream.record_kept() else {
        // Nothing unrecorded (someone recorded it meanwhile), or the record failed and the
        // launches were completed with its error: either way the outcome slot says.
        return Inline::NotTried;
    };
    if !Arc::ptr_eq(&batch.launches.cell, cell) {
        // Our batch was recorded by another thread between our look and the take: this one
        // holds later launches, which their own awaiters may watch.
        thread::hand_over(host, batch);
        return Inline::NotTried;
    }
    watch(host, batch, budget)
}

/// Query the batch's event until it completes or `budget` runs out.
fn watch(host: &Arc<Host>, batch: super::Batch, budget: Duration) -> Inline {
    let start = Instant::now();
    let mut looks = 0u32;
    loop {
        // The context is bound on this thread: `record_kept` entered it to record the event.
        if let Some(outcome) = poll_batch(host, &batch, batch.generation) {
            complete(host, batch.launches, &outcome);
            host.counters
                .batches_completed_by_poll
                .fetch_add(1, Ordering::Relaxed);
            return Inline::Done;
        }
        if start.elapsed() >= budget {
            thread::hand_over(host, batch);
            return Inline::HandedOver;
        }
        looks += 1;
        if looks.is_multiple_of(QUERIES_PER_YIELD) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
