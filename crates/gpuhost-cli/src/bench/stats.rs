//! Sample summaries (median and percentiles) and a minimal block_on for awaiting one future.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// A summary of one metric's samples (same unit as the samples).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl Summary {
    pub fn of(mut samples: Vec<f64>) -> Self {
        samples.sort_by(|a, b| a.total_cmp(b));
        Self {
            n: samples.len(),
            min: samples.first().copied().unwrap_or(f64::NAN),
            p10: quantile(&samples, 0.10),
            median: quantile(&samples, 0.50),
            p90: quantile(&samples, 0.90),
            p99: quantile(&samples, 0.99),
        }
    }
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Drive one future to completion on this thread (parks between polls; woken by its Waker).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Drive one future to completion on this thread, yielding (not parking) between polls: a busy
/// executor worker, which pays no OS wake-up when the future's Waker fires.
pub fn block_on_spin<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_picks_nearest_rank_percentiles() {
        let s = Summary::of((1..=100).rev().map(f64::from).collect());
        assert_eq!((s.n, s.min, s.median, s.p99), (100, 1.0, 51.0, 99.0));
        assert!(Summary::of(Vec::new()).median.is_nan());
    }

    #[test]
    fn block_on_returns_a_ready_value() {
        assert_eq!(block_on(async { 7 }), 7);
    }
}
