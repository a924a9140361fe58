//! A function's gpuhost:cuda host calls on /metrics: `host_call_duration_seconds{call}`, a
//! histogram of each call's time, and its count and sum shown again as `host_calls_total{call}`
//! and `host_call_seconds_total{call}` (what a dashboard rates; read from the histogram at
//! scrape time, so a call adds to the histogram only). A request's time on the server's clock has a
//! tail (at one connection on an H100, 12% of `respond` phases took over 80 µs where the median
//! is near 40), and only the calls' own distributions say which call carries it: the kernel's
//! wait in `read-after`, the launch, or none (then the guest's own code and its crossings).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::metrics::histogram::exponential_buckets;

use super::histogram::SecondsHistogram;
use super::{CallLabels, Metrics};

/// 1 µs .. ~1 s: a call that only checks and queues takes a few µs, one that waits for a kernel
/// takes as long as the kernel.
pub(super) fn call_histogram() -> SecondsHistogram {
    SecondsHistogram::new(exponential_buckets(1e-6, 2.0, 21))
}

/// The histograms of one function's host calls, by `HostCall as usize`; each call's series are
/// made at its first use (a function makes a few of the calls, and every series made is on
/// /metrics), after that one call costs two atomic additions and no label work.
pub(crate) struct CallCounters {
    function: String,
    metrics: Arc<Metrics>,
    by_call: Vec<OnceLock<SecondsHistogram>>,
}

impl CallCounters {
    pub(super) fn new(function: &str, metrics: Arc<Metrics>) -> Self {
        Self {
            function: function.to_string(),
            metrics,
            by_call: gpuhost_wasm::HostCall::ALL
                .iter()
                .map(|_| OnceLock::new())
                .collect(),
        }
    }
}

impl gpuhost_wasm::CallObserver for CallCounters {
    fn observe(&self, call: gpuhost_wasm::HostCall, elapsed: Duration) {
        let Some(slot) = self.by_call.get(call as usize) else {
            return;
        };
        let histogram = slot.get_or_init(|| {
            let labels = CallLabels {
                function: self.function.clone(),
                call: call.name().to_string(),
            };
            let histogram = self.metrics.host_call_duration.get_or_create_owned(&labels);
            let m = &self.metrics;
            m.host_calls.get_or_create_owned(&labels).show(&histogram);
            m.host_call_seconds
                .get_or_create_owned(&labels)
                .show(&histogram);
            histogram
        });
        histogram.observe(elapsed.as_secs_f64());
    }
}
