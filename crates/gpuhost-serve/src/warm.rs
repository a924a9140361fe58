//! Warm Stores: each device of a version keeps Stores made and instantiated ahead of the next
//! requests, so a request does not wait for its Store's setup and the component's instantiation
//! (at one connection, those were much of what serve added to the same GPU work done in
//! process). Each request, once its response is sent and its Store torn down (crate::invoke),
//! tops the device's spares up in its own task; several requests' tasks may each be making one
//! at a time (each Store is claimed under the spares' lock, so together they never make more than
//! the depth asks). Each Store is still fresh: no request has run in it, and one request takes
//! it whole (never reused); on the GPU it holds only a sandboxed function's arena and control
//! block, taken from the version's pool when it was made (a pair reset when it was given back,
//! or a new one), which go back to the pool with it. A version closes its spares before it
//! releases its bundle. A new version takes over the depth the old one had grown to on each
//! device and has its Stores made before it is published ([`prewarm`]), so a swap under load
//! does not send the next requests to make their own.
//!
//! The depth follows demand: [`WARM_PER_DEVICE`] at rest; each request that finds none ready
//! (a miss) adds one, up to the function's max_concurrency and [`WARM_MAX_PER_DEVICE`]. While
//! it is above the rest depth a task of the device looks every [`SHRINK_EVERY`]: a period with
//! no miss gives back half of the spares no request needed (the fewest ready in the period), all
//! of them when no request came at all, down to the rest depth (at 64 connections a depth of 4
//! left 58% of the requests on the H200 making their own Store; session 14). A Store whose
//! making ends with the depth already met (it shrank meanwhile) is dropped. Every spare Store
//! holds a slot of the server's instance pool: none is made when fewer than
//! [`SLOTS_LEFT_TO_REQUESTS`] are free.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;
use wasmtime_wasi_http::p2::bindings::Proxy;

use crate::engine::RequestState;
use crate::invoke::GaugeHold;
use crate::metrics::{FunctionMetrics, Made, Phase};
use crate::version::{Version, VersionGuard};

/// Warm Stores kept per device of a version at rest: enough for a burst of requests to find
/// theirs made while the refill catches up, few enough that the instance slots, guest memories
/// and sandbox pairs they hold stay small.
pub(crate) const WARM_PER_DEVICE: usize = 4;
/// The most warm Stores a device of a version keeps under load (and at most the function's
/// max_concurrency): each holds an instance slot of the server's 1024 (crate::engine's
/// `POOLED_STORES`), its guest's memory and a sandbox pair.
pub(crate) const WARM_MAX_PER_DEVICE: usize = 64;
/// Slots of the server's instance pool that warm Stores never take: however many functions
/// grew their spares, a request that finds none makes its own Store without waiting for one.
pub(crate) const SLOTS_LEFT_TO_REQUESTS: usize = 256;
/// How often a device whose depth grew looks whether its spares went unused.
pub(crate) const SHRINK_EVERY: Duration = Duration::from_millis(500);
/// Tasks per device that make a new version's Stores before it is published ([`prewarm`]).
const PREWARM_MAKERS: usize = 4;
/// The longest a new version's publication waits for its Stores to be made ([`prewarm`]).
pub(crate) const PREWARM_WAIT: Duration = Duration::from_secs(1);

/// A Store with the component instantiated in it, and what a request needs of it.
pub(crate) struct Ready {
    pub(crate) store: Store<RequestState>,
    pub(crate) proxy: Proxy,
    pub(crate) stderr: crate::stderr::StderrTail,
    /// Its slot of the server's instance pool.
    pub(crate) slot: OwnedSemaphorePermit,
    /// Counts it in `gpuhost_function_warm_stores` until it is taken or dropped.
    pub(crate) _counted: GaugeHold,
}

/// One device's warm Stores and their depth.
#[derive(Default)]
pub(crate) struct Spare {
    state: Mutex<Stock>,
}

/// What [`Spare`]'s lock guards.
#[derive(Default)]
struct Stock {
    ready: VecDeque<Ready>,
    /// Stores being made now (claimed by a refill, not yet ready).
    making: usize,
    /// The depth now: 0 until the first refill sets it to the rest depth.
    depth: usize,
    /// Since the shrinker's last look: the fewest Stores ready after a take, whether a request
    /// found none, and whether any request came.
    low: usize,
    missed: bool,
    taken: bool,
    /// A shrinker task runs for this device.
    shrinking: bool,
}

impl Spare {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stock> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A warm Store, if one is ready (the oldest: every one is equally fresh).
    pub(crate) fn take(&self) -> Option<Ready> {
        let mut st = self.lock();
        let ready = st.ready.pop_front()?;
        st.low = st.low.min(st.ready.len());
        st.taken = true;
        Some(ready)
    }

    /// Drops the warm Stores (a draining version, before its bundle is released), outside the
    /// lock: a Store's drop frees its guest's memory and gives its sandbox back.
    pub(crate) fn clear(&self) {
        // Taken in its own statement: the lock's guard, a temporary, goes at its end.
        let ready = std::mem::take(&mut self.lock().ready);
        drop(ready);
    }
}

/// The rest depth of `version`'s devices, and the most they grow to.
fn depths(version: &Version) -> (usize, usize) {
    let most = version.config.max_concurrency as usize;
    (WARM_PER_DEVICE.min(most), WARM_MAX_PER_DEVICE.min(most))
}

/// A request on device `device` found no warm Store: the device keeps one more from now on
/// (up to its most), and a shrinker gives them back once they go unused.
pub(crate) fn missed(version: &Arc<Version>, device: usize) {
    let Some(slot) = version.devices.get(device) else {
        return;
    };
    let (rest, most) = depths(version);
    let start_shrinker = {
        let mut st = slot.spare.lock();
        st.missed = true;
        st.taken = true;
        st.depth = (st.depth.max(rest) + 1).min(most);
        let start = st.depth > rest && !st.shrinking;
        st.shrinking |= start;
        start
    };
    if start_shrinker {
        spawn_shrinker(version, device);
    }
}

/// Starts device `device`'s shrinker, which the caller marked as running.
fn spawn_shrinker(version: &Arc<Version>, device: usize) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn(shrink(Arc::downgrade(version), device))),
        // (Requests and loads always run in one.) Without a runtime the depth is not given back.
        Err(_) => version.devices[device].spare.lock().shrinking = false,
    }
}

/// Before `new` is published in place of `old`: each device of `new` takes the depth that the
/// same device (the same host) of `old` has grown to, and Stores are made to it, so requests
/// right after the swap find as many ready as before it. Published at the rest depth instead,
/// a version under load sent every request past its four spares to make its own Store (and,
/// sandboxed, to wait for a pair) until the misses had grown the depth again. Waits at most
/// [`PREWARM_WAIT`]: a component whose start code runs long holds back its publication no
/// longer than that, and the Stores still being made then are put with the others when done,
/// as a refill's are. Without an `old` that serves, none are made first: on a first load
/// nothing answers the route until `new` is published (and a repository's functions load one
/// after another at start, so each would hold back the next), and a stale `old` (its context
/// was lost) fails its requests until then. Returns the Stores ready.
pub(crate) async fn prewarm(
    new: &Arc<Version>,
    old: Option<&Version>,
    metrics: &Arc<FunctionMetrics>,
) -> usize {
    let (rest, most) = depths(new);
    let hurry = old.is_none_or(Version::stale);
    let mut makers = Vec::new();
    for (device, slot) in new.devices.iter().enumerate() {
        let grown = old
            .and_then(|o| o.devices.iter().find(|d| Arc::ptr_eq(&d.host, &slot.host)))
            .map_or(rest, |d| d.spare.lock().depth);
        {
            let mut st = slot.spare.lock();
            st.depth = grown.clamp(rest, most);
            st.low = st.depth;
        }
        if hurry {
            continue;
        }
        // Each maker claims one Store at a time, so together they make exactly the depth.
        for _ in 0..PREWARM_MAKERS {
            match start_refill(new, device, metrics) {
                Some(making) => makers.push(tokio::spawn(making)),
                None => break,
            }
        }
    }
    // Not cancelled at the deadline (a maker dropped mid-make would leave its claim counted):
    // a JoinHandle dropped lets its task run on.
    let deadline = tokio::time::Instant::now() + PREWARM_WAIT;
    for maker in makers {
        if tokio::time::timeout_at(deadline, maker).await.is_err() {
            break;
        }
    }
    new.devices.iter().map(|d| d.spare.lock().ready.len()).sum()
}

/// `version` was just published: device `device` tops its Stores up to its depth (those a
/// [`prewarm`] has not made yet), and a depth it took over from the version it replaced shrinks
/// back once unused, like one grown by misses.
pub(crate) fn published(version: &Arc<Version>, device: usize, metrics: &Arc<FunctionMetrics>) {
    let Some(slot) = version.devices.get(device) else {
        return;
    };
    let rest = depths(version).0;
    let start_shrinker = {
        let mut st = slot.spare.lock();
        // Counted as taken: the first look after publication then halves only the spares no
        // request needed, rather than giving back the whole depth to a quiet first 500 ms.
        st.taken = true;
        let start = st.depth > rest && !st.shrinking;
        st.shrinking |= start;
        start
    };
    if start_shrinker {
        spawn_shrinker(version, device);
    }
    refill(version, device, metrics);
}

/// Device `device`'s shrinker: every [`SHRINK_EVERY`], a period without a miss gives back half
/// the spares no request needed (all of them when no request came), down to the rest depth;
/// it ends there, or once the version drains (its drain drops them all) or is gone.
async fn shrink(version: Weak<Version>, device: usize) {
    loop {
        tokio::time::sleep(SHRINK_EVERY).await;
        // A guard while Stores are dropped here: a drain releases the bundle they hold only
        // once they are gone.
        let Some(guard) = version.upgrade().and_then(|v| v.try_enter()) else {
            return;
        };
        let version = &guard.0;
        let rest = depths(version).0;
        let spare = &version.devices[device].spare;
        let (surplus, done) = {
            let mut st = spare.lock();
            if !st.taken {
                st.depth = rest;
            } else if !st.missed {
                st.depth = st.depth.saturating_sub(st.low / 2).max(rest);
            }
            let keep = st.depth.min(st.ready.len());
            let surplus = st.ready.split_off(keep);
            (st.missed, st.taken) = (false, false);
            st.low = st.ready.len();
            let done = st.depth <= rest;
            st.shrinking = !done;
            (surplus, done)
        };
        // Outside the lock: each Store's drop frees its guest's memory and gives its pair back.
        drop(surplus);
        drop(guard);
        if done {
            return;
        }
    }
}

/// Tops up device `device`'s warm Stores in the background. Each Store is made under a guard of
/// the version (a drain waits for it; a version already draining gets none) and with its own
/// instance-pool slot (none but the [`SLOTS_LEFT_TO_REQUESTS`] free: the refill stops, a request
/// makes its own Store).
pub(crate) fn refill(version: &Arc<Version>, device: usize, metrics: &Arc<FunctionMetrics>) {
    if let Some(refilling) = start_refill(version, device, metrics) {
        tokio::spawn(refilling);
    }
}

/// [`refill`]'s work, for a task that runs it itself (a request's teardown, already on a task
/// of its own, saves the spawn and the wake-up of a second one); None when the device's spares
/// (with those being made) are at its depth already.
pub(crate) fn start_refill(
    version: &Arc<Version>,
    device: usize,
    metrics: &Arc<FunctionMetrics>,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let slot = version.devices.get(device)?;
    if !claim(&slot.spare, version, metrics) {
        return None;
    }
    let (version, metrics) = (version.clone(), metrics.clone());
    Some(async move {
        let spare = &version.devices[device].spare;
        // One Store at a time in this task, each claimed first: other requests' tasks may be
        // making others meanwhile.
        loop {
            let made = make_one(&version, device, &metrics).await;
            let mut st = spare.lock();
            st.making = st.making.saturating_sub(1);
            metrics.warm_making.dec();
            // Put with the others before the guard goes, so a drain that finds the version
            // empty finds this Store too, and drops it.
            let Some((ready, _guard)) = made else {
                // None could be made: the next request's teardown tries again.
                break;
            };
            if st.ready.len() >= st.depth {
                // The depth shrank while it was made, and the shrinker, which gives back only
                // Stores ready, may have ended since: kept, it would stay past the depth until
                // a request took it. Dropped outside the lock, before its guard.
                drop(st);
                drop(ready);
                break;
            }
            st.ready.push_back(ready);
            drop(st);
            if !claim(spare, &version, &metrics) {
                break;
            }
        }
    })
}

/// Claims the making of one Store for `spare`, if it (with those being made) is short of its
/// depth. It is counted in `metrics.warm_making` from here until it is put with the ready ones,
/// where `warm` counts it already, or given up: a Store being made, which may hold its sandbox
/// pair a while, is always in one gauge or both.
fn claim(spare: &Spare, version: &Version, metrics: &FunctionMetrics) -> bool {
    let mut st = spare.lock();
    if st.depth == 0 {
        st.depth = depths(version).0;
        st.low = st.depth;
    }
    let short = st.ready.len() + st.making < st.depth;
    if short {
        st.making += 1;
        metrics.warm_making.inc();
    }
    short
}

/// Makes one warm Store of device `device`, with the guard of the version it was made under
/// (for the caller to hold until it is put with the others); None when none could be made
/// (the version is draining, the instance pool is full, or making failed).
async fn make_one(
    version: &Arc<Version>,
    device: usize,
    metrics: &Arc<FunctionMetrics>,
) -> Option<(Ready, VersionGuard)> {
    let guard = version.try_enter()?;
    if version.stores.available_permits() <= SLOTS_LEFT_TO_REQUESTS {
        return None;
    }
    let permit = version.stores.clone().try_acquire_owned().ok()?;
    // Bounded like a request: a component whose start code never ends cannot hold the
    // version's drain.
    let made = tokio::time::timeout(version.config.timeout, make(version, device, metrics)).await;
    let Ok(Ok((store, proxy, stderr))) = made else {
        return None;
    };
    let ready = Ready {
        store,
        proxy,
        stderr,
        slot: permit,
        _counted: GaugeHold::new(&metrics.warm),
    };
    Some((ready, guard))
}

/// A new Store on device `device` with the component instantiated in it, timed under the
/// `warm_` phases: this work follows an earlier request's response, no request waits for it.
async fn make(
    version: &Version,
    device: usize,
    metrics: &Arc<FunctionMetrics>,
) -> wasmtime::Result<(Store<RequestState>, Proxy, crate::stderr::StderrTail)> {
    let (mut store, stderr) = crate::invoke::new_store(version, device, metrics, Made::Ahead)?;
    let start = Instant::now();
    let proxy = version.pre.instantiate_async(&mut store).await?;
    metrics.phase(
        Made::Ahead.phase(Phase::Instantiate),
        start.elapsed().as_secs_f64(),
    );
    if version.config.limits.sandbox {
        prepare_sandbox(&mut store, metrics, Made::Ahead).await;
    }
    Ok((store, proxy, stderr))
}

/// A sandboxed guest's arena and control block, before its handler runs, rather than at its
/// first device call: a new pair's making, or the wait for one on its way back (pool/lend.rs in
/// gpuhost-wasm says why it waits), is then no part of a warm Store's request; and a Store made
/// for a request (no warm one was ready: after a swap, say) awaits a pair on its way back
/// instead of making one in its first device call, which blocks its thread in the driver. On
/// the H200 such makes, 14k in 10 s of swaps, each freed again past the pool's bound, drained
/// swaps for seconds (bench/h200-runs/2026-12-03-s25/). A failure here is the guest's to see at
/// that call, as without it. Timed as `made`'s sandbox phase.
pub(crate) async fn prepare_sandbox(
    store: &mut Store<RequestState>,
    metrics: &FunctionMetrics,
    made: Made,
) {
    let start = Instant::now();
    match store.data_mut().cuda.prepare_sandbox_waiting().await {
        Ok(()) => metrics.phase(made.phase(Phase::Sandbox), start.elapsed().as_secs_f64()),
        Err(e) => {
            tracing::debug!(error = %e, "a Store's sandbox is left to its guest's first device call")
        }
    }
}
