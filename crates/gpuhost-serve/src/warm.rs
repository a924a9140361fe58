//! Warm Stores: each device of a version keeps one Store made and instantiated ahead of the next
//! request, so a lone request does not wait for its Store's setup and the component's
//! instantiation (at one connection, those were much of what serve added to the same GPU work
//! done in process). Each take starts a refill in the background. The Store is still fresh:
//! no request has run in it; on the GPU it holds only a sandboxed function's arena and control
//! block, taken from the version's pool and zeroed when it was made (so that reset is not part
//! of the request), which go back to the pool with it. A version closes its spares before it
//! releases its bundle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi_http::p2::bindings::Proxy;

use crate::engine::RequestState;
use crate::metrics::{FunctionMetrics, Phase};
use crate::version::Version;

/// A Store with the component instantiated in it, and what a request needs of it.
pub(crate) struct Ready {
    pub(crate) store: Store<RequestState>,
    pub(crate) proxy: Proxy,
    pub(crate) stderr: MemoryOutputPipe,
    /// Its slot of the server's instance pool.
    pub(crate) slot: OwnedSemaphorePermit,
}

/// One device's warm Store, and whether a refill is under way.
#[derive(Default)]
pub(crate) struct Spare {
    ready: Mutex<Option<Ready>>,
    refilling: AtomicBool,
}

impl Spare {
    /// The warm Store, if one is ready.
    pub(crate) fn take(&self) -> Option<Ready> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Drops the warm Store (a draining version, before its bundle is released).
    pub(crate) fn clear(&self) {
        drop(self.take());
    }
}

/// Makes device `device`'s next warm Store in the background, unless one is ready or being made,
/// the version is draining, or the instance pool is full.
pub(crate) fn refill(version: &Arc<Version>, device: usize, metrics: &Arc<FunctionMetrics>) {
    let Some(slot) = version.devices.get(device) else {
        return;
    };
    if slot.spare.refilling.swap(true, Ordering::AcqRel) {
        return;
    }
    let filled = slot.spare.ready.lock().map(|r| r.is_some()).unwrap_or(true);
    // The guard keeps a drain waiting while the Store (holding the bundle) is made; a version
    // already draining gets no new spare.
    let guard = (!filled).then(|| version.try_enter()).flatten();
    let permit = guard
        .as_ref()
        .and_then(|_| version.stores.clone().try_acquire_owned().ok());
    let (Some(guard), Some(permit)) = (guard, permit) else {
        slot.spare.refilling.store(false, Ordering::Release);
        return;
    };
    let (version, metrics) = (version.clone(), metrics.clone());
    let timeout = version.config.timeout;
    tokio::spawn(async move {
        let slot = &version.devices[device];
        // Bounded like a request: a component whose start code never ends cannot hold the
        // version's drain.
        let made = tokio::time::timeout(timeout, make(&version, device, &metrics)).await;
        if let Ok(Ok((store, proxy, stderr))) = made {
            let mut ready = slot.spare.ready.lock().unwrap_or_else(|p| p.into_inner());
            if ready.is_none() {
                *ready = Some(Ready {
                    store,
                    proxy,
                    stderr,
                    slot: permit,
                });
            }
        }
        slot.spare.refilling.store(false, Ordering::Release);
        drop(guard);
    });
}

/// A new Store on device `device` with the component instantiated in it.
async fn make(
    version: &Version,
    device: usize,
    metrics: &Arc<FunctionMetrics>,
) -> wasmtime::Result<(Store<RequestState>, Proxy, MemoryOutputPipe)> {
    let (mut store, stderr) = crate::invoke::new_store(version, device, metrics)?;
    let start = Instant::now();
    let proxy = version.pre.instantiate_async(&mut store).await?;
    metrics.phase(Phase::Instantiate, start.elapsed().as_secs_f64());
    // A sandboxed guest's arena and control block, zeroed, now rather than at its first device
    // call: that reset (the whole arena zeroed and waited for) is then no part of the request.
    // A failure here is the guest's to see at that call, as without a warm Store.
    if version.config.limits.sandbox {
        let start = Instant::now();
        match store.data_mut().cuda.prepare_sandbox() {
            Ok(()) => metrics.phase(Phase::Sandbox, start.elapsed().as_secs_f64()),
            Err(e) => {
                tracing::debug!(error = %e, "a warm Store's sandbox is left to its guest's first device call")
            }
        }
    }
    Ok((store, proxy, stderr))
}
