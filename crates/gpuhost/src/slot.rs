//! The model slot: hands out the current registry per request (counted in flight) and swaps in
//! a new one atomically, draining and releasing the old one, never unloading it under a user.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::registry::Registry;
use crate::release::{ReleaseReport, release};

/// One published registry and its in-flight count.
struct Entry {
    registry: Arc<Registry>,
    version: u64,
    in_flight: Mutex<usize>,
    drained: Condvar,
}

/// A registry that could not be released after a swap; it stays loaded until `retry_retired`.
#[derive(Debug)]
pub struct Retired {
    /// The registry, still loaded.
    pub registry: Arc<Registry>,
    /// The slot version it served as.
    pub version: u64,
    /// Why it was not released.
    pub reason: String,
}

/// What a swap did.
#[derive(Debug)]
pub struct SwapReport {
    /// Version now serving.
    pub new_version: u64,
    /// Version replaced.
    pub old_version: u64,
    /// Time from publish until the old registry's requests drained (or the timeout).
    pub drain_time: Duration,
    /// Whether all old requests finished within the timeout.
    pub drained: bool,
    /// The old registry's release, when it happened.
    pub release: Option<ReleaseReport>,
    /// Why the old registry was retired instead of released, if it was.
    pub retired: Option<String>,
    /// Total swap time.
    pub duration: Duration,
}

/// Serves one model at a time; requests take a lease, swaps replace the model under load.
pub struct ModelSlot {
    current: Mutex<Arc<Entry>>,
    versions: AtomicUsize,
    retired: Mutex<Vec<Retired>>,
    /// Serialises swaps (two concurrent swaps would race on which old one to drain).
    swapping: Mutex<()>,
}

/// A request's hold on the current registry; counted in flight until dropped.
pub struct ModelLease {
    registry: Option<Arc<Registry>>,
    entry: Arc<Entry>,
    label: String,
}

impl ModelLease {
    /// The registry this request uses (the same for its whole life, across swaps).
    pub fn registry(&self) -> &Arc<Registry> {
        self.registry
            .as_ref()
            .unwrap_or_else(|| unreachable!("taken only in Drop"))
    }

    /// The slot version of that registry.
    pub fn version(&self) -> u64 {
        self.entry.version
    }

    /// The label given at acquire.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A kernel of the leased registry, labelled with the lease's label.
    pub fn kernel(&self, name: &str) -> Result<crate::Kernel> {
        self.registry().kernel_labeled(name, &self.label)
    }
}

impl std::ops::Deref for ModelLease {
    type Target = Arc<Registry>;
    fn deref(&self) -> &Arc<Registry> {
        self.registry()
    }
}

impl Drop for ModelLease {
    fn drop(&mut self) {
        // Drop our registry Arc before leaving the in-flight count, so that a drained entry
        // really has no lease-held Arcs left when release counts holders.
        drop(self.registry.take());
        let mut n = self
            .entry
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            self.entry.drained.notify_all();
        }
    }
}

impl ModelSlot {
    /// A slot serving `registry` as version 1.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            current: Mutex::new(Arc::new(Entry {
                registry,
                version: 1,
                in_flight: Mutex::new(0),
                drained: Condvar::new(),
            })),
            versions: AtomicUsize::new(1),
            retired: Mutex::new(Vec::new()),
            swapping: Mutex::new(()),
        }
    }

    /// Take the current registry for one request.
    pub fn acquire(&self, label: &str) -> Result<ModelLease> {
        let cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cur.clone();
        // Counted while the slot lock is held, so a swap that has published a new entry sees
        // every lease of the old one.
        *entry.in_flight.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        drop(cur);
        Ok(ModelLease {
            registry: Some(entry.registry.clone()),
            entry,
            label: label.to_string(),
        })
    }

    /// The current version.
    pub fn version(&self) -> u64 {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .version
    }

    /// Load a bundle, then swap it in; on a load failure the old model keeps serving.
    pub fn swap_load(
        &self,
        bundle_dir: impl AsRef<Path>,
        drain_timeout: Duration,
    ) -> Result<SwapReport> {
        let host = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .registry
            .host()
            .clone();
        let new = Registry::load(&host, bundle_dir)?;
        Ok(self.swap(new, drain_timeout))
    }

    /// Publish `new` atomically, wait up to `drain_timeout` for requests on the old registry,
    /// then release it. A timeout or a refused release retires the old registry (still loaded,
    /// reported in the SwapReport and `retired()`), never unloads it under a user.
    pub fn swap(&self, new: Arc<Registry>, drain_timeout: Duration) -> SwapReport {
        let _one = self.swapping.lock().unwrap_or_else(|p| p.into_inner());
        let start = Instant::now();
        let version = self.versions.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        let new_entry = Arc::new(Entry {
            registry: new,
            version,
            in_flight: Mutex::new(0),
            drained: Condvar::new(),
        });
        let old = std::mem::replace(
            &mut *self.current.lock().unwrap_or_else(|p| p.into_inner()),
            new_entry,
        );
        let drain_start = Instant::now();
        let drained = {
            let deadline = drain_start + drain_timeout;
            let mut n = old.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if *n == 0 {
                    break true;
                }
                let now = Instant::now();
                if now >= deadline {
                    break false;
                }
                n = old
                    .drained
                    .wait_timeout(n, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        };
        let drain_time = drain_start.elapsed();
        let old_version = old.version;
        let registry = old.registry.clone();
        // Leases hold the Entry too; once drained none remain but ours.
        drop(old);
        let (release_report, retired) = if !drained {
            let reason =
                format!("requests still in flight after the {drain_timeout:?} drain timeout");
            self.retire(registry, old_version, reason.clone());
            (None, Some(reason))
        } else {
            match release(registry) {
                Ok(r) => (Some(r), None),
                Err(refused) => {
                    let reason = refused.error.to_string();
                    self.retire(refused.registry, old_version, reason.clone());
                    (None, Some(reason))
                }
            }
        };
        SwapReport {
            new_version: version,
            old_version,
            drain_time,
            drained,
            release: release_report,
            retired,
            duration: start.elapsed(),
        }
    }

    fn retire(&self, registry: Arc<Registry>, version: u64, reason: String) {
        tracing::warn!(
            registry = registry.name(),
            version,
            "retired, not released: {reason}"
        );
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Retired {
                registry,
                version,
                reason,
            });
    }

    /// Registries retired by swaps and not yet released: (name, version, reason).
    pub fn retired(&self) -> Vec<(String, u64, String)> {
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|r| (r.registry.name().to_string(), r.version, r.reason.clone()))
            .collect()
    }

    /// Try to release every retired registry again; returns the releases that succeeded.
    pub fn retry_retired(&self) -> Vec<ReleaseReport> {
        let list = std::mem::take(&mut *self.retired.lock().unwrap_or_else(|p| p.into_inner()));
        let mut done = Vec::new();
        for r in list {
            match release(r.registry) {
                Ok(rep) => done.push(rep),
                Err(refused) => self.retire(refused.registry, r.version, refused.error.to_string()),
            }
        }
        done
    }
}
