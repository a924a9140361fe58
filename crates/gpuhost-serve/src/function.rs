//! A function in the repository: the version serving it (published atomically through an
//! `ArcSwapOption`), its admission control (a bounded queue in front of a concurrency limit),
//! its budget of log lines (crate::log_budget), its metrics, and loading a new version beside
//! the old one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use crate::config::FunctionConfig;
use crate::log_budget::{DEFAULT_BURST, DEFAULT_PER_MINUTE, LogBudget};
use crate::metrics::FunctionMetrics;
use crate::version::{ReleaseOutcome, Version, VersionGuard};

/// What a function's state is, as Triton's repository index says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// A version is serving.
    Ready,
    /// No version serves: never loaded, unloaded, or its load failed (the reason).
    Unavailable(String),
}

/// Admission: at most `max_concurrency` running and `max_queue` waiting.
pub(crate) struct Admission {
    permits: Arc<Semaphore>,
    admitted: AtomicUsize,
    capacity: usize,
}

/// A request's place in its function's admission (running or queued).
pub(crate) struct Admitted(Arc<Admission>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    fn new(max_concurrency: u32, max_queue: u32) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrency as usize)),
            admitted: AtomicUsize::new(0),
            capacity: max_concurrency as usize + max_queue as usize,
        }
    }

    /// A place, or None when running + waiting is at capacity (the caller answers 429).
    pub(crate) fn try_admit(self: &Arc<Self>) -> Option<Admitted> {
        let before = self.admitted.fetch_add(1, Ordering::SeqCst);
        let admitted = Admitted(self.clone());
        (before < self.capacity).then_some(admitted)
    }

    /// Waits for a running slot.
    pub(crate) async fn run_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().acquire_owned().await.ok()
    }
}

/// A function of the repository.
pub struct Function {
    /// The folder name.
    pub name: String,
    current: ArcSwapOption<Version>,
    /// Admission of the serving configuration (replaced with a new version's limits).
    admission: arc_swap::ArcSwap<Admission>,
    pub(crate) metrics: Arc<FunctionMetrics>,
    /// The log lines its failed requests may write, of the serving version's quota; kept across
    /// versions of the same quota, so loading one does not refill it.
    log: arc_swap::ArcSwap<LogBudget>,
    /// The last load's failure, shown while no version serves.
    last_error: std::sync::Mutex<Option<String>>,
    /// Loads and unloads of this function run one at a time.
    pub(crate) loading: Mutex<()>,
    next_version: AtomicU64,
    /// When a reload after a context loss last failed, and why (crate::recover).
    pub(crate) recovery_failed: std::sync::Mutex<Option<(std::time::Instant, String)>>,
}

impl Function {
    pub(crate) fn new(name: &str, metrics: Arc<FunctionMetrics>) -> Self {
        Self {
            name: name.to_string(),
            current: ArcSwapOption::empty(),
            admission: arc_swap::ArcSwap::from_pointee(Admission::new(1, 0)),
            log: arc_swap::ArcSwap::from_pointee(LogBudget::new(
                DEFAULT_BURST,
                DEFAULT_PER_MINUTE,
                metrics.log_suppressed.clone(),
            )),
            metrics,
            last_error: std::sync::Mutex::new(None),
            loading: Mutex::new(()),
            next_version: AtomicU64::new(1),
            recovery_failed: std::sync::Mutex::new(None),
        }
    }

    /// The version serving now, if any.
    pub fn current(&self) -> Option<Arc<Version>> {
        self.current.load_full()
    }

    /// The serving version's wall-time limit and request-body limit, read without taking a
    /// count of the version (an `Arc` every request of the function would bump).
    pub(crate) fn serving_limits(&self) -> Option<(Duration, u64)> {
        let current = self.current.load();
        let v = current.as_ref()?;
        Some((v.config.timeout, v.config.max_body_bytes))
    }

    /// The serving version, held for one request: it stays loaded until the guard drops. A
    /// version read just before a swap unpublished it is draining and refuses the request;
    /// the one published in its place (if any) is taken instead.
    pub(crate) fn pin(&self) -> Option<VersionGuard> {
        loop {
            let version = self.current.load_full()?;
            if let Some(guard) = version.try_enter() {
                return Some(guard);
            }
            // Closed only after it was swapped out: the next load sees its successor.
            std::hint::spin_loop();
        }
    }

    /// Its budget of log lines, for a failed request's warning.
    pub(crate) fn log_budget(&self) -> Arc<LogBudget> {
        self.log.load_full()
    }

    /// The admission in force.
    pub(crate) fn admission(&self) -> Arc<Admission> {
        self.admission.load_full()
    }

    /// Ready, or why not.
    pub fn state(&self) -> State {
        if self.current.load().is_some() {
            return State::Ready;
        }
        let error = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        State::Unavailable(error.clone().unwrap_or_else(|| "unloaded".to_string()))
    }

    /// True when no version serves because the last load failed (an explicit unload does not
    /// count): the server is then not ready, as Triton's strict readiness.
    pub fn failed(&self) -> bool {
        self.current.load().is_none()
            && self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
    }

    /// The number the next loaded version gets.
    pub(crate) fn take_version_number(&self) -> u64 {
        self.next_version.fetch_add(1, Ordering::SeqCst)
    }

    /// Records a failed load: the old version (if any) keeps serving.
    pub(crate) fn load_failed(&self, error: &str) {
        self.metrics.swap(false);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(error.to_string());
    }

    /// Whether the serving version holds device code of a context generation that is gone (a
    /// foreign reset of the primary context): its requests would fail until it is reloaded.
    pub(crate) fn stale(&self) -> bool {
        self.current.load().as_ref().is_some_and(|v| v.stale())
    }

    /// Publishes `new` atomically; the version it replaces (returned) is still to be drained
    /// and released ([`Version::drain_and_release`]).
    pub(crate) fn publish(&self, new: Arc<Version>) -> Option<Arc<Version>> {
        let config = &new.config;
        let admission = Admission::new(config.max_concurrency, config.max_queue);
        self.metrics.version.set(new.number as i64);
        let bundle = new.bundle_bytes * new.devices.len() as u64;
        self.metrics.bundle_bytes.set(bundle as i64);
        // Requests admitted under the old limits finish under them; new ones see the new.
        self.admission.store(Arc::new(admission));
        if let Some(log) = self
            .log
            .load()
            .of_quota(config.log_lines_burst, config.log_lines_per_minute)
        {
            self.log.store(Arc::new(log));
        }
        let old = self.current.swap(Some(new.clone()));
        // Its Stores, made before (crate::warm::prewarm) or from now on, while the old drains.
        for device in 0..new.devices.len() {
            crate::warm::published(&new, device, &self.metrics);
        }
        self.metrics.swap(true);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
        old
    }

    /// Unpublishes the serving version, drains and releases it.
    pub(crate) async fn unpublish(&self, drain: Duration) -> Option<ReleaseOutcome> {
        let old = self.current.swap(None);
        self.metrics.version.set(0);
        self.metrics.bundle_bytes.set(0);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
        match old {
            Some(old) => Some(old.drain_and_release(drain).await),
            None => None,
        }
    }

    /// The configuration of the serving version.
    pub fn config(&self) -> Option<FunctionConfig> {
        self.current().map(|v| v.config.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_holds_running_plus_queued_and_refusals_take_no_place() {
        let a = Arc::new(Admission::new(2, 1));
        for _ in 0..2 {
            let held: Vec<_> = (0..3).map(|_| a.try_admit().expect("room for 3")).collect();
            for _ in 0..5 {
                assert!(a.try_admit().is_none(), "a 4th place was given");
            }
            drop(held);
        }
        assert_eq!(a.admitted.load(Ordering::SeqCst), 0);
    }

    /// A request reads the serving version, then a swap publishes the next one and drains and
    /// releases the one it read before the request counted itself in (nothing held it yet):
    /// the request must run on the new version, never on the released one with no bundle.
    #[tokio::test]
    async fn a_request_that_read_the_version_before_a_swap_released_it_runs_on_the_new_one() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let opts = crate::ServeOptions::new(root.join("../../examples/repository"));
        let server = crate::Server::new(&opts).unwrap();
        server.load("saxpy").await.unwrap();
        let function = server.function("saxpy").unwrap();
        let read_before_the_swap = function.current().unwrap();
        let report = server.load("saxpy").await.unwrap();
        assert_eq!(report.released.map(|r| r.abandoned), Some(0));
        assert!(
            read_before_the_swap
                .devices
                .iter()
                .all(|d| d.bundle.load().is_none()),
            "the old version was released"
        );
        assert!(
            read_before_the_swap.try_enter().is_none(),
            "a drained version let a request in"
        );
        let pinned = function.pin().expect("the new version serves");
        assert_eq!(pinned.0.number, 2);
        assert!(pinned.0.devices.iter().all(|d| d.bundle.load().is_some()));
        drop(pinned);
        server.unload_all().await;
    }
}
