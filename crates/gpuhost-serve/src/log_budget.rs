//! A function's budget of the log lines its failed requests write. Each request whose guest
//! trapped or set no response, or that a failed reload refused, is a warning of up to 32 KiB
//! (a trap's detail and the guest's stderr: crate::failure), so a client calling a failing
//! function as fast as it can wrote the log at its own rate: a full disk, a log pipeline's
//! bill. Each function may write `burst` such lines at once, then `per_minute` a minute
//! (governor's GCRA: the budget refills one line every 60 s / `per_minute`, up to `burst`);
//! a line over it is not written but counted in `gpuhost_log_lines_suppressed_total`, and the
//! next line written says how many were held back before it. Only the log is budgeted: every
//! such request still gets its JSON error and request id, though the log may have no line for
//! that id.
//!
//! No line is written just to report suppressed ones: when the failures stop, the count of the
//! last ones held back is on /metrics only.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use prometheus_client::metrics::counter::Counter;

/// Lines a function's failed requests may log at once (function.toml's `[serve]
/// log_lines_burst`): enough for the first failures of an incident, each with its detail.
pub(crate) const DEFAULT_BURST: NonZeroU32 = NonZeroU32::new(20).unwrap();
/// Lines a minute after those (`[serve] log_lines_per_minute`): one a second, at most about
/// 110 MiB an hour per function at the 32 KiB a line can be.
pub(crate) const DEFAULT_PER_MINUTE: NonZeroU32 = NonZeroU32::new(60).unwrap();

/// One function's budget of log lines, of one quota.
pub(crate) struct LogBudget<C: Clock = DefaultClock> {
    burst: NonZeroU32,
    per_minute: NonZeroU32,
    limiter: RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<C::Instant>>,
    /// Lines held back since the last one written, which that next one reports.
    pending: AtomicU64,
    /// `gpuhost_log_lines_suppressed_total{function}`.
    suppressed: Counter,
}

impl LogBudget {
    /// A full budget of `burst` lines, then `per_minute`; lines held back are counted in
    /// `suppressed`.
    pub(crate) fn new(burst: NonZeroU32, per_minute: NonZeroU32, suppressed: Counter) -> Self {
        Self::with_clock(burst, per_minute, suppressed, DefaultClock::default())
    }

    /// This budget if it is of `burst` and `per_minute` already (a new version of the same
    /// quota does not refill it), else a full one of that quota, which reports the lines this
    /// one held back since its last.
    pub(crate) fn of_quota(&self, burst: NonZeroU32, per_minute: NonZeroU32) -> Option<Self> {
        if (burst, per_minute) == (self.burst, self.per_minute) {
            return None;
        }
        let next = Self::new(burst, per_minute, self.suppressed.clone());
        next.pending
            .store(self.pending.swap(0, Ordering::Relaxed), Ordering::Relaxed);
        Some(next)
    }
}

impl<C: Clock> LogBudget<C> {
    fn with_clock(
        burst: NonZeroU32,
        per_minute: NonZeroU32,
        suppressed: Counter,
        clock: C,
    ) -> Self {
        let quota = Quota::per_minute(per_minute).allow_burst(burst);
        Self {
            burst,
            per_minute,
            limiter: RateLimiter::direct_with_clock(quota, clock),
            pending: AtomicU64::new(0),
            suppressed,
        }
    }

    /// Whether one more line may be written: then what to say in it of the lines held back
    /// before it; None when it is over the budget (and so counted as held back).
    pub(crate) fn admit(&self) -> Option<Suppressed> {
        if self.limiter.check().is_ok() {
            return Some(Suppressed(self.pending.swap(0, Ordering::Relaxed)));
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.suppressed.inc();
        None
    }
}

/// The lines held back before the one being written: nothing when none were, else a note to end
/// its message with.
pub(crate) struct Suppressed(u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = if self.0 == 1 { "line" } else { "lines" };
        match self.0 {
            0 => Ok(()),
            n => write!(
                f,
                " ({n} earlier {lines} of this function's held back: over its log budget, function.toml's [serve] log_lines_burst and log_lines_per_minute)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use governor::clock::FakeRelativeClock;

    use super::*;

    fn n(v: u32) -> NonZeroU32 {
        NonZeroU32::new(v).unwrap()
    }

    #[test]
    fn a_budget_writes_its_burst_then_per_minute_and_the_next_line_written_tells_how_many_were_held_back()
     {
        let clock = FakeRelativeClock::default();
        let counter = Counter::default();
        let budget = LogBudget::with_clock(n(3), n(6), counter.clone(), clock.clone());
        let notes: Vec<_> = (0..3)
            .map(|_| budget.admit().map(|s| s.to_string()))
            .collect();
        assert_eq!(notes, vec![Some(String::new()); 3], "the burst");
        for _ in 0..5 {
            assert!(
                budget.admit().is_none(),
                "a line past the burst was let through"
            );
        }
        assert_eq!(counter.get(), 5);
        // 6 a minute: one more every 10 s.
        clock.advance(Duration::from_secs(10));
        let note = budget.admit().map(|s| s.to_string()).unwrap_or_default();
        assert!(
            note.contains(" (5 earlier lines of this function's held back"),
            "{note:?}"
        );
        assert!(budget.admit().is_none());
        clock.advance(Duration::from_secs(10));
        let note = budget.admit().map(|s| s.to_string());
        assert_eq!(
            note.as_deref(),
            Some(
                " (1 earlier line of this function's held back: over its log budget, function.toml's [serve] log_lines_burst and log_lines_per_minute)"
            )
        );
        assert_eq!(counter.get(), 6, "every line held back is counted once");
    }

    #[test]
    fn a_new_quota_gets_a_full_budget_that_reports_the_old_ones_held_back_and_the_same_keeps_it() {
        let counter = Counter::default();
        let budget = LogBudget::new(n(1), n(1), counter.clone());
        assert!(budget.admit().is_some());
        assert!(budget.admit().is_none());
        assert!(
            budget.of_quota(n(1), n(1)).is_none(),
            "the same quota refilled"
        );
        let next = budget.of_quota(n(2), n(1)).expect("a new quota");
        let note = next.admit().map(|s| s.to_string()).unwrap_or_default();
        assert!(note.contains(" (1 earlier line"), "{note:?}");
        assert!(next.admit().is_some(), "a burst of 2");
        assert!(next.admit().is_none());
        assert_eq!(counter.get(), 2, "one counter over both budgets");
    }
}
