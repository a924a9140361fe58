//! Warm Stores: each device of a version keeps a few Stores made and instantiated ahead of the
//! next requests ([`WARM_PER_DEVICE`], at most the function's max_concurrency), so a request
//! does not wait for its Store's setup and the component's instantiation (at one connection,
//! those were much of what serve added to the same GPU work done in process). Each request,
//! once its response is sent and its Store torn down (crate::invoke), starts a refill in the
//! background, which makes Stores one after another until the device's spares are
//! full again. Each Store is still fresh: no request has run in it, and one request takes it
//! whole (never reused); on the GPU it holds only a sandboxed function's arena and control
//! block, taken from the version's pool when it was made (a pair reset when it was given back,
//! or a new one), which go back to the pool with it. A version closes its spares before it
//! releases its bundle, and a new version's are made as soon as it is published.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi_http::p2::bindings::Proxy;

use crate::engine::RequestState;
use crate::invoke::GaugeHold;
use crate::metrics::{FunctionMetrics, Phase};
use crate::version::Version;

/// Warm Stores kept per device of a version: enough for a burst of requests to find theirs
/// made while the refill catches up, few enough that the instance slots, guest memories and
/// sandbox pairs they hold stay small.
pub(crate) const WARM_PER_DEVICE: usize = 4;

/// A Store with the component instantiated in it, and what a request needs of it.
pub(crate) struct Ready {
    pub(crate) store: Store<RequestState>,
    pub(crate) proxy: Proxy,
    pub(crate) stderr: MemoryOutputPipe,
    /// Its slot of the server's instance pool.
    pub(crate) slot: OwnedSemaphorePermit,
    /// Counts it in `gpuhost_function_warm_stores` until it is taken or dropped.
    pub(crate) _counted: GaugeHold,
}

/// One device's warm Stores, and whether a refill is under way.
#[derive(Default)]
pub(crate) struct Spare {
    ready: Mutex<VecDeque<Ready>>,
    refilling: AtomicBool,
}

impl Spare {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Ready>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A warm Store, if one is ready (the oldest: every one is equally fresh).
    pub(crate) fn take(&self) -> Option<Ready> {
        self.lock().pop_front()
    }

    /// Drops the warm Stores (a draining version, before its bundle is released), outside the
    /// lock: a Store's drop frees its guest's memory and gives its sandbox back.
    pub(crate) fn clear(&self) {
        drop(std::mem::take(&mut *self.lock()));
    }
}

/// How many warm Stores `version` keeps per device.
fn depth(version: &Version) -> usize {
    WARM_PER_DEVICE.min(version.config.max_concurrency as usize)
}

/// Fills device `device`'s warm Stores in the background, one Store after another, unless a
/// refill is under way there already. Each Store is made under a guard of the version (a drain
/// waits for it; a version already draining gets none) and with its own instance-pool slot
/// (none free: the refill stops, a request makes its own Store).
pub(crate) fn refill(version: &Arc<Version>, device: usize, metrics: &Arc<FunctionMetrics>) {
    if let Some(refilling) = start_refill(version, device, metrics) {
        tokio::spawn(refilling);
    }
}

/// [`refill`]'s work, for a task that runs it itself (a request's teardown, already on a task
/// of its own, saves the spawn and the wake-up of a second one); None when the device's spares
/// are full or a refill is under way there already.
pub(crate) fn start_refill(
    version: &Arc<Version>,
    device: usize,
    metrics: &Arc<FunctionMetrics>,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let slot = version.devices.get(device)?;
    if slot.spare.lock().len() >= depth(version)
        || slot.spare.refilling.swap(true, Ordering::AcqRel)
    {
        return None;
    }
    let (version, metrics) = (version.clone(), metrics.clone());
    Some(async move {
        let spare = &version.devices[device].spare;
        let short = || spare.lock().len() < depth(&version);
        loop {
            // (`short()` releases the lock before a Store is made: make_one takes it to put the
            // Store with the others.)
            let mut failed = false;
            while short() {
                if !make_one(&version, device, &metrics).await {
                    failed = true;
                    break;
                }
            }
            spare.refilling.store(false, Ordering::Release);
            // A take between the last look and the flag's clearing saw the refill under way
            // and left its Store to it: look again (unless making failed: the next take
            // tries again).
            if failed || !short() || spare.refilling.swap(true, Ordering::AcqRel) {
                break;
            }
        }
    })
}

/// Makes one warm Store of device `device` and puts it with the others; false when none could
/// be made (the version is draining, the instance pool is full, or making failed).
async fn make_one(version: &Arc<Version>, device: usize, metrics: &Arc<FunctionMetrics>) -> bool {
    let Some(guard) = version.try_enter() else {
        return false;
    };
    let Ok(permit) = version.stores.clone().try_acquire_owned() else {
        return false;
    };
    // Bounded like a request: a component whose start code never ends cannot hold the
    // version's drain.
    let made = tokio::time::timeout(version.config.timeout, make(version, device, metrics)).await;
    let Ok(Ok((store, proxy, stderr))) = made else {
        return false;
    };
    // Put with the others before the guard goes, so a drain that finds the version empty
    // finds this Store too, and drops it.
    version.devices[device].spare.lock().push_back(Ready {
        store,
        proxy,
        stderr,
        slot: permit,
        _counted: GaugeHold::new(&metrics.warm),
    });
    drop(guard);
    true
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
    // A sandboxed guest's arena and control block now rather than at its first device call: a
    // new pair's making (when no reset one is ready) is then no part of the request.
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
