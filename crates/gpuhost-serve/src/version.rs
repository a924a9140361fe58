//! One loaded version of a function: its component compiled once and pre-instantiated, and its
//! bundle loaded once on each of its devices. Requests hold a [`VersionGuard`]; after a swap the
//! old version is drained (no guard left) and its device code released — gpuhost's `ModelSlot`
//! contract, with the component and the bundle swapped together.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::sync::Notify;
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::config::FunctionConfig;
use crate::engine::{RequestState, Wasm};
use crate::error::{Error, Result};
use crate::warm::Spare;

/// Sandbox pairs handed out by a version's pools, by how.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SandboxTakes {
    /// A reset pair was ready.
    pub reused: u64,
    /// A reset pair came after a wait (its zeroing, or the resetter's pass).
    pub waited: u64,
    /// None came: a new one was made.
    pub created: u64,
}

/// One device a version runs on, with the version's bundle loaded there.
pub(crate) struct DeviceSlot {
    pub(crate) host: Arc<gpuhost::Host>,
    /// The host's context generation when the bundle was loaded: once the host's moves on (a
    /// foreign reset of the primary context), the bundle and the Stores made for it are dead.
    pub(crate) generation: u64,
    /// Taken out at release; requests clone it into their Store.
    pub(crate) bundle: ArcSwapOption<gpuhost::Registry>,
    /// Sandboxed functions: the sandbox's rewrite of the bundle (`bundle` holds its rewritten
    /// kernels), so the guest's scalars cannot carry the operator's kernels out of its memory.
    pub(crate) rewrite: Option<Arc<gpuhost_wasm::BundleRewrite>>,
    /// Requests running on this device.
    pub(crate) running: AtomicUsize,
    /// Sandboxed functions: the arenas and control blocks its requests reuse (reset between
    /// them), so a request does not map, zero, register and free its own.
    pub(crate) sandbox: Option<Arc<gpuhost_wasm::SandboxPool>>,
    /// Stores made and instantiated ahead of the next requests here (crate::warm).
    pub(crate) spare: Spare,
    /// Modules this version's sandboxed guests loaded from PTX here, shared by its Stores: a
    /// handler that loads its module on every request rewrites and JIT-compiles it once. One
    /// cache per version and device, never shared between functions (a guest can time its
    /// loads: gpuhost_wasm::ModuleCache).
    pub(crate) modules: Arc<gpuhost_wasm::ModuleCache>,
}

/// Sandbox pairs a version keeps per device, per request it may run at once: those of finished
/// requests wait for their kernels and watch to let go (within the watchdog's tick under load).
const SANDBOX_KEPT_PER_RUNNING: usize = 2;

/// A loaded function version.
pub struct Version {
    /// 1 for the first successful load of a function, +1 per successful load since (set when
    /// it is published).
    pub number: u64,
    pub(crate) config: FunctionConfig,
    pub(crate) pre: ProxyPre<RequestState>,
    /// The server's bound on Stores alive at once (the instance pool's size).
    pub(crate) stores: Arc<tokio::sync::Semaphore>,
    pub(crate) devices: Vec<DeviceSlot>,
    /// Bytes of the bundle's module files (per device).
    pub bundle_bytes: u64,
    /// How long loading took (compile + bundle loads).
    pub load_time: Duration,
    /// The component came from the compile cache (function.wasm unchanged since a recent load).
    pub compile_cached: bool,
    /// Requests holding this version, with [`CLOSED`] set once it is draining.
    in_flight: AtomicUsize,
    drained: Notify,
    next_device: AtomicU64,
}

/// The bit of `Version::in_flight` that closes a version to new requests: set when its drain
/// begins, so a request that read the version just before it was unpublished cannot enter it
/// after the drain saw it empty (and run with its bundle released).
const CLOSED: usize = 1 << (usize::BITS - 1);

/// How releasing an old version went.
#[derive(Debug, Clone)]
pub struct ReleaseOutcome {
    /// Requests still running when the drain timed out (0: drained).
    pub abandoned: usize,
    /// Registries that could not be released (something held them), with gpuhost's reason.
    pub refused: Vec<String>,
    /// Time spent draining and releasing.
    pub took: Duration,
}

impl Version {
    /// Compiles `config`'s component and loads its bundle on each of `hosts`. The sandbox pool
    /// of `previous` (the version it replaces) carries over on each device where the arena
    /// size is unchanged, so a swap does not start its requests on a cold pool (every pair is
    /// reset before any request gets it, whichever version's request held it last).
    pub(crate) fn load(
        wasm: &Wasm,
        config: FunctionConfig,
        hosts: &[Arc<gpuhost::Host>],
        previous: Option<&Version>,
    ) -> Result<Self> {
        let start = Instant::now();
        if hosts.is_empty() {
            return Err(Error::NoDevices);
        }
        let path = config.wasm_path();
        let bytes = std::fs::read(&path).map_err(|source| Error::Read { path, source })?;
        let (pre, compile_cached) = wasm.prepare(&config.name, &bytes)?;
        let bundle_dir = config.bundle_dir();
        let bundle_bytes = bundle_dir.as_deref().map(dir_bytes).unwrap_or(0);
        let mut devices = Vec::with_capacity(hosts.len());
        for host in hosts {
            // Read before loading: a loss during the load leaves the slot stale, never the
            // other way round.
            let generation = host.generation();
            let (bundle, rewrite) = match &bundle_dir {
                Some(dir) if config.limits.sandbox => {
                    let (registry, rewrite) = gpuhost_wasm::BundleRewrite::load(host, dir)
                        .map_err(|source| Error::SandboxedBundle {
                            function: config.name.clone(),
                            device: host.ordinal(),
                            source,
                        })?;
                    (Some(registry), Some(rewrite))
                }
                Some(dir) => {
                    let registry =
                        gpuhost::Registry::load(host, dir).map_err(|source| Error::Bundle {
                            function: config.name.clone(),
                            device: host.ordinal(),
                            source,
                        })?;
                    (Some(registry), None)
                }
                None => (None, None),
            };
            let kept = config.max_concurrency as usize * SANDBOX_KEPT_PER_RUNNING;
            let inherited = previous
                .into_iter()
                .flat_map(|v| &v.devices)
                .filter_map(|d| d.sandbox.as_ref())
                .find(|p| p.serves(host, &config.limits))
                .cloned();
            let sandbox = config.limits.sandbox.then(|| {
                inherited.unwrap_or_else(|| {
                    gpuhost_wasm::SandboxPool::new(host.clone(), &config.limits, kept)
                })
            });
            devices.push(DeviceSlot {
                host: host.clone(),
                generation,
                bundle: ArcSwapOption::new(bundle),
                rewrite,
                running: AtomicUsize::new(0),
                sandbox,
                spare: Spare::default(),
                modules: Arc::default(),
            });
        }
        Ok(Self {
            number: 0,
            config,
            pre,
            stores: wasm.stores.clone(),
            devices,
            bundle_bytes,
            load_time: start.elapsed(),
            compile_cached,
            in_flight: AtomicUsize::new(0),
            drained: Notify::new(),
            next_device: AtomicU64::new(0),
        })
    }

    /// Counts a request in (the guard counts it out), or None once the version is draining:
    /// the caller then takes the version published in its place.
    pub(crate) fn try_enter(self: &Arc<Self>) -> Option<VersionGuard> {
        // Both sides are SeqCst read-modify-writes of the one word: either this increment comes
        // first and the drain waits for it, or the drain's CLOSED comes first and is seen here.
        let before = self.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = VersionGuard(self.clone());
        if before & CLOSED != 0 {
            drop(guard);
            return None;
        }
        Some(guard)
    }

    /// Sandbox pairs its pools keep now, over its devices, and how many of them are not ready
    /// yet (waiting for their last request to let go, or being reset or freed).
    pub(crate) fn sandbox_kept(&self) -> (usize, usize) {
        self.devices
            .iter()
            .filter_map(|d| d.sandbox.as_ref())
            .fold((0, 0), |(k, p), pool| (k + pool.kept(), p + pool.pending()))
    }

    /// Sandbox pairs its pools have handed out since they were made, over its devices.
    pub(crate) fn sandbox_takes(&self) -> SandboxTakes {
        self.devices.iter().filter_map(|d| d.sandbox.as_ref()).fold(
            SandboxTakes::default(),
            |t, pool| SandboxTakes {
                reused: t.reused + pool.reused(),
                waited: t.waited + pool.waited(),
                created: t.created + pool.created(),
            },
        )
    }

    /// Loads from PTX of this version's sandboxed Stores, over its devices: [found in the
    /// version's module cache, rewritten and loaded].
    pub(crate) fn module_loads(&self) -> [u64; 2] {
        self.devices.iter().fold([0; 2], |[cached, loaded], d| {
            let s = d.modules.stats();
            [cached + s.hits, loaded + s.misses]
        })
    }

    /// Whether a device's context was lost since this version was loaded there (its bundle,
    /// warm Stores and module cache there are dead). Noticed once anything enters the host.
    pub(crate) fn stale(&self) -> bool {
        self.devices
            .iter()
            .any(|d| d.host.generation() != d.generation)
    }

    /// Requests holding this version.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst) & !CLOSED
    }

    /// The index of the device for the next request: the least busy, round-robin among equals.
    pub(crate) fn pick_device(&self) -> usize {
        let n = self.devices.len();
        if n == 1 {
            // No choice: no shared round-robin counter to bump.
            return 0;
        }
        let start = self.next_device.fetch_add(1, Ordering::Relaxed) as usize % n;
        (0..n)
            .map(|i| (start + i) % n)
            .min_by_key(|&i| self.devices[i].running.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// Closes this version to new requests, waits (up to `timeout`) for every request holding
    /// it to end, then releases its bundle on every device. Call after unpublishing it.
    pub(crate) async fn drain_and_release(&self, timeout: Duration) -> ReleaseOutcome {
        let start = Instant::now();
        self.in_flight.fetch_or(CLOSED, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.drained.notified();
            if self.in_flight() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let abandoned = self.in_flight();
        let mut refused = Vec::new();
        if abandoned == 0 {
            // Closed and empty: no spare is being made (a refill holds a guard) and none can be
            // again; the one ready holds the bundle, so it goes first.
            for slot in &self.devices {
                slot.spare.clear();
                slot.modules.clear();
            }
            for slot in &self.devices {
                if let Some(registry) = slot.bundle.swap(None) {
                    // release may wait briefly for a kernel being dropped: off the executor.
                    match tokio::task::spawn_blocking(move || gpuhost::release(registry)).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => refused.push(e.to_string()),
                        Err(e) => refused.push(format!("release task failed: {e}")),
                    }
                }
            }
        } else {
            refused.push(format!(
                "{abandoned} requests still running after {timeout:?}: its device code stays loaded until they end"
            ));
        }
        ReleaseOutcome {
            abandoned,
            refused,
            took: start.elapsed(),
        }
    }
}

/// A request's hold on a version.
pub(crate) struct VersionGuard(pub(crate) Arc<Version>);

impl Drop for VersionGuard {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) & !CLOSED == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

/// Bytes of the files directly in `dir` (a bundle's modules and manifest).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
