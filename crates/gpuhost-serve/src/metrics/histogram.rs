//! Seconds, counted without a lock or a retry loop. [`SecondsHistogram`]: `prometheus-client`'s
//! `Histogram` takes a write lock (a `parking_lot::RwLock`) on every observation, and every
//! request of a function observes seven (its duration, queue time and five phases) into the same
//! few histograms, so at 16 and 64 connections all of the server's threads took turns on those
//! locks. Here an observation is two atomic additions: its bucket's count and the sum, kept in
//! whole nanoseconds (an integer addition, where a sum of `f64` needs a compare-and-swap loop).
//! It encodes as the crate's own histogram does (same buckets, same text); the count is the sum
//! of the bucket counts read, so a scrape taken while requests run never shows a count that
//! disagrees with its `+Inf` bucket. [`HistogramTotal`]: a histogram's count or sum shown as a
//! counter of its own (`gpuhost_host_calls_total` and `gpuhost_host_call_seconds_total` are
//! `gpuhost_host_call_duration_seconds`'s), read at scrape time, so a gpuhost:cuda call (nine a
//! request for the stamp function) adds to one histogram and not to two more counters besides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// A histogram of durations in seconds; clones share the counts.
#[derive(Clone, Debug)]
pub struct SecondsHistogram(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Upper bounds in seconds, ascending; the last bucket (`+Inf`) is implicit.
    bounds: Box<[f64]>,
    /// Observations per bucket (not cumulative), one more than `bounds` (`+Inf`).
    counts: Box<[AtomicU64]>,
    /// Sum of the observations in nanoseconds.
    sum_nanos: AtomicU64,
}

impl SecondsHistogram {
    /// A histogram with these upper bounds (seconds, ascending), plus `+Inf`.
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Box<[f64]> = bounds.into_iter().collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Self(Arc::new(Inner {
            bounds,
            counts,
            sum_nanos: AtomicU64::new(0),
        }))
    }

    /// Records one observation of `seconds` (negative or NaN counts as 0).
    pub fn observe(&self, seconds: f64) {
        let inner = &*self.0;
        let bucket = inner
            .bounds
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(inner.bounds.len());
        inner.counts[bucket].fetch_add(1, Ordering::Relaxed);
        // `as` saturates: NaN and negatives to 0, centuries to u64::MAX.
        let nanos = (seconds * 1e9).round() as u64;
        inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The sum in seconds, the count, and the (upper bound, count) of each bucket, `+Inf` last
    /// as `f64::MAX` (the form `MetricEncoder::encode_histogram` takes).
    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let inner = &*self.0;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(inner.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        (sum, count, buckets)
    }
}

impl TypedMetric for SecondsHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SecondsHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The count (`SUM` false) or the sum in seconds (`SUM` true) of the [`SecondsHistogram`] it
/// is shown ([`HistogramTotal::show`]), encoded as a counter; zero until then. A `Family`
/// makes each by `Default`, so the histogram is attached after.
#[derive(Clone, Debug, Default)]
pub struct HistogramTotal<const SUM: bool>(Arc<OnceLock<SecondsHistogram>>);

impl<const SUM: bool> HistogramTotal<SUM> {
    /// Makes this the count or sum of `histogram` (a second call keeps the first histogram:
    /// the series of one label set are made once and shared).
    pub fn show(&self, histogram: &SecondsHistogram) {
        let _ = self.0.set(histogram.clone());
    }
}

impl<const SUM: bool> TypedMetric for HistogramTotal<SUM> {
    const TYPE: MetricType = MetricType::Counter;
}

impl<const SUM: bool> EncodeMetric for HistogramTotal<SUM> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, _) = self.0.get().map_or((0.0, 0, Vec::new()), |h| h.snapshot());
        if SUM {
            encoder.encode_counter::<NoLabelSet, _, u64>(&sum, None)
        } else {
            encoder.encode_counter::<NoLabelSet, _, u64>(&count, None)
        }
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
    use prometheus_client::registry::Registry;

    use super::*;

    fn text<M: EncodeMetric + TypedMetric + Clone + Send + Sync + std::fmt::Debug + 'static>(
        metric: &M,
    ) -> String {
        let mut registry = Registry::default();
        registry.register("h", "A histogram", metric.clone());
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn observations_encode_as_prometheus_clients_own_histogram_does() {
        let bounds = || exponential_buckets(0.125, 2.0, 5);
        let (ours, theirs) = (SecondsHistogram::new(bounds()), Histogram::new(bounds()));
        // On a bound, between bounds, below the first, past the last (+Inf), and zero: each
        // value a whole number of nanoseconds and a short binary fraction, so both sums are
        // exact and the texts compare whole.
        for v in [0.5, 0.375, 0.0625, 0.0, 3.0, 0.125, 2.0, 0.5, 9.0] {
            ours.observe(v);
            theirs.observe(v);
        }
        assert_eq!(text(&ours), text(&theirs));
    }

    #[test]
    fn the_count_is_the_observations_and_the_sum_their_seconds() {
        let h = SecondsHistogram::new([1e-3, 1e-2]);
        h.observe(2e-3);
        h.observe(5e-4);
        h.observe(7.0);
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 3);
        assert!((sum - 7.0025).abs() < 1e-9, "sum {sum}");
        assert_eq!(buckets, vec![(1e-3, 1), (1e-2, 1), (f64::MAX, 1)]);
    }

    #[test]
    fn a_histograms_count_and_sum_encode_as_the_counters_of_the_same_observations_do() {
        let h = SecondsHistogram::new([1e-3, 1e-2]);
        let (count, sum) = (
            HistogramTotal::<false>::default(),
            HistogramTotal::<true>::default(),
        );
        let (calls, seconds) = (
            Counter::<u64>::default(),
            Counter::<f64, AtomicU64>::default(),
        );
        // Zero before a histogram is shown, as a counter never added to.
        assert_eq!(text(&count), text(&calls));
        assert_eq!(text(&sum), text(&seconds));
        count.show(&h);
        sum.show(&h);
        for ms in [250, 125, 1500] {
            h.observe(ms as f64 / 1e3);
            calls.inc();
            seconds.inc_by(ms as f64 / 1e3);
        }
        assert_eq!(text(&count), text(&calls));
        assert_eq!(text(&sum), text(&seconds));
    }
}
