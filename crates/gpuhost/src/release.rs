//! Releasing a registry: refuse while anyone else holds it (naming them), wait for its pending
//! launches, queue every module for unloading, report.
//!
//! The unloads themselves run on the host's release thread (deferred.rs): cuModuleUnload waits
//! for every kernel running on the device, another guest's included (up to its
//! `max_kernel_time`), and release is called from request paths and tokio workers. The report
//! says how many modules were queued; [`Host::wait_unloads`](crate::Host::wait_unloads) waits
//! until they are unloaded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::registry::Registry;

/// What a successful release did.
#[derive(Debug, Clone)]
pub struct ReleaseReport {
    /// The registry's name.
    pub registry: String,
    /// Modules queued for unloading on the host's release thread, which unloads them once the
    /// kernels running on the device (anyone's) have ended: [`Host::wait_unloads`] waits for
    /// that. 0 when the context generation was lost (its modules went with it). An unload that
    /// fails there is logged and counted in [`HostStats::drop_errors`].
    ///
    /// [`Host::wait_unloads`]: crate::Host::wait_unloads
    /// [`HostStats::drop_errors`]: crate::HostStats::drop_errors
    pub modules_queued: usize,
    /// Time spent waiting for the registry's pending launches.
    pub waited: Duration,
    /// Total time of the release.
    pub duration: Duration,
    /// True when the registry's context generation was already gone (nothing left to unload).
    pub context_lost: bool,
}

/// A refused release: the registry is handed back, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("release of registry '{}' refused: {error}", registry.name())]
pub struct ReleaseRefused {
    /// The registry, still loaded and usable.
    pub registry: Arc<Registry>,
    /// Why (HandlesOutstanding).
    pub error: Error,
}

/// How long release waits for holders that are in the middle of dropping their handles.
const SETTLE: Duration = Duration::from_millis(20);

/// Release `registry`: refuse while other holders exist; otherwise wait for its pending work,
/// queue every module for unloading and report. It waits for the registry's own launches only,
/// never for other kernels running on the device.
pub fn release(registry: Arc<Registry>) -> Result<ReleaseReport, ReleaseRefused> {
    let start = Instant::now();
    loop {
        let holders = holders(&registry);
        if holders.is_empty() {
            break;
        }
        // A Kernel being dropped leaves the holder table a moment before its Arc goes; only
        // unnamed Arc holders are worth a short wait.
        let only_arcs = holders.iter().all(|h| h.starts_with("other "));
        if !only_arcs || start.elapsed() > SETTLE {
            let error = Error::HandlesOutstanding {
                registry: registry.name().to_string(),
                count: holders.len(),
                holders,
            };
            return Err(ReleaseRefused { registry, error });
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let wait_start = Instant::now();
    registry.core.wait_idle();
    let waited = wait_start.elapsed();
    let context_lost = registry.host().generation() != registry.generation();
    let modules_queued = registry.core.queue_unloads();
    Ok(ReleaseReport {
        registry: registry.name().to_string(),
        modules_queued,
        waited,
        duration: start.elapsed(),
        context_lost,
    })
}

/// Everyone but the caller holding the registry: kernels (name + label), then plain Arcs.
pub(crate) fn holders(registry: &Arc<Registry>) -> Vec<String> {
    // Every shard locked (in order, as nothing else takes two) while the Arcs are counted, so
    // no kernel taken or dropped meanwhile is counted twice or not at all.
    let shards: Vec<_> = registry
        .holders
        .iter()
        .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()))
        .collect();
    let kernels = shards.iter().map(|h| h.by_id.len()).sum::<usize>();
    let mut out: Vec<String> = shards
        .iter()
        .flat_map(|h| h.by_id.values())
        .map(|(k, label)| {
            let k = k.name();
            if label.is_empty() {
                format!("kernel '{k}' (no label)")
            } else {
                format!("kernel '{k}' (label '{label}')")
            }
        })
        .collect();
    let others = Arc::strong_count(registry)
        .saturating_sub(1)
        .saturating_sub(kernels);
    if others > 0 {
        out.push(format!("other Arc<Registry> handle(s): {others}"));
    }
    out
}
