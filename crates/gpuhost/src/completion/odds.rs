//! Whether an `.await`'s spin is paying, per host. A poll that spins (mod.rs: watching its
//! launch for the host's budget before it returns Pending) saves a wake-up when the launch ends
//! within the budget, and burns the whole budget when it does not. Where the launches awaited
//! take longer than the budget (a request's kernel and download under load, in `gpuhost serve`:
//! every spin ran out, 10 µs of an executor thread for nothing, on a server whose throughput
//! follows its CPU per request), the polls stop spinning; a few still do, so a return to short
//! launches is noticed.
//!
//! The rule is a saturating score: +1 for a spin that caught its launch, -1 for one that ran out,
//! and polls spin while it is not negative: they keep spinning while more than half of the
//! recent spins pay. By the spin-then-block argument (mod.rs) a spin that pays saves about what
//! one that does not costs, so that is where spinning stops paying.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// How far the score goes either way: how many spins of the other outcome it takes to turn it.
const LIMIT: i32 = 16;
/// While the score is negative, one poll in this many spins anyway (a probe).
const PROBE_EVERY: u32 = 8;

/// A host's record of its recent spins (on its own cache line: every awaiting thread touches it).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct SpinOdds {
    score: AtomicI32,
    /// Polls that did not spin since the last probe (wraps).
    skipped: AtomicU32,
}

impl SpinOdds {
    /// Whether the next poll should spin; false counts it as skipped.
    pub(crate) fn should_spin(&self) -> bool {
        if self.score.load(Ordering::Relaxed) >= 0 {
            return true;
        }
        let n = self.skipped.fetch_add(1, Ordering::Relaxed);
        n % PROBE_EVERY == PROBE_EVERY - 1
    }

    /// Records how a spin ended: it caught its launch, or ran out of budget.
    pub(crate) fn record(&self, caught: bool) {
        let step = if caught { 1 } else { -1 };
        // Relaxed: the score steers a heuristic; no memory is published through it.
        let _ = self
            .score
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let next = (s + step).clamp(-LIMIT, LIMIT);
                (next != s).then_some(next)
            });
    }

    /// Forgets the record (a new budget is a new question).
    pub(crate) fn reset(&self) {
        self.score.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spins_of(odds: &SpinOdds, polls: u32) -> u32 {
        (0..polls).filter(|_| odds.should_spin()).count() as u32
    }

    #[test]
    fn polls_spin_while_spins_pay_and_only_probe_once_they_run_out() {
        let odds = SpinOdds::default();
        assert_eq!(spins_of(&odds, 100), 100, "a new host spins");
        for _ in 0..LIMIT as usize * 4 {
            odds.record(true);
        }
        // Paying spins saturate: as many misses as the limit turn the score negative, not more.
        for _ in 0..LIMIT {
            odds.record(false);
        }
        assert_eq!(spins_of(&odds, 10), 10, "score 0: still spinning");
        odds.record(false);
        assert_eq!(
            spins_of(&odds, 8 * PROBE_EVERY),
            8,
            "one probe per {PROBE_EVERY} polls once the spins run out"
        );
    }

    #[test]
    fn probes_that_pay_bring_spinning_back_and_a_reset_forgets() {
        let odds = SpinOdds::default();
        for _ in 0..LIMIT * 3 {
            odds.record(false);
        }
        assert_eq!(spins_of(&odds, PROBE_EVERY), 1);
        for _ in 0..LIMIT {
            odds.record(true);
        }
        assert_eq!(spins_of(&odds, 20), 20);
        for _ in 0..LIMIT {
            odds.record(false);
        }
        odds.record(false);
        odds.reset();
        assert_eq!(spins_of(&odds, 20), 20);
    }
}
