//! Kernel registries (the modules of one model) and the kernels taken from them.
//!
//! A `Kernel` keeps its registry alive and is recorded as a holder (kernel name + label) so that
//! `release` can refuse, naming who still holds it. Pending launches keep the loaded modules
//! (`Core`) alive without counting as holders: release waits for them instead.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use cudarc::driver::sys::{CUfunction, CUmodule, CUresult};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::launch::{Arg, LaunchConfig, ParamInfo};
use crate::manifest::{ModuleSource, read_bundle};
use crate::module;
use crate::ptx_sig;
use crate::result::{self, has_symbol};
use crate::stats::Counters;

/// Where a kernel's parameter list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// cuFuncGetParamInfo.
    Driver,
    /// The PTX `.entry` signature.
    Ptx,
}

pub(crate) struct KernelEntry {
    name: String,
    func: CUfunction,
    params: Vec<ParamInfo>,
    source: ParamSource,
}

impl KernelEntry {
    /// The kernel's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

// SAFETY: a CUfunction is an immutable driver handle usable from any thread with its context bound.
unsafe impl Send for KernelEntry {}
// SAFETY: as above; the entry is never mutated after construction.
unsafe impl Sync for KernelEntry {}

/// The loaded modules of a registry, kept alive by the registry and by pending launches.
pub(crate) struct Core {
    host: Arc<Host>,
    generation: u64,
    pub(crate) modules: Mutex<Vec<(String, SendModule)>>,
    /// Launches pending on these modules. An atomic, so launching costs no lock; the mutex
    /// below only pairs with `drained` for release's wait.
    pending: AtomicUsize,
    idle_lock: Mutex<()>,
    drained: Condvar,
}

// SAFETY: module handles are driver objects usable from any thread with the context bound;
// the list is behind a mutex.
unsafe impl Send for Core {}
// SAFETY: as above.
unsafe impl Sync for Core {}

impl Core {
    /// Block until no launch using these modules is pending.
    pub(crate) fn wait_idle(&self) {
        let mut g = self.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under idle_lock, which the last guard takes before notifying: its notify
        // cannot fall between this check and the wait.
        while self.pending.load(Ordering::SeqCst) > 0 {
            g = self.drained.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Hands every module still loaded to the host's release thread (see deferred.rs), which
    /// unloads them: cuModuleUnload waits for every kernel running on the device, which must
    /// not hold this thread. Returns how many were queued; none when the context generation is
    /// gone (the modules died with it; their handle values may belong to the new context now,
    /// so they must never be unloaded).
    pub(crate) fn queue_unloads(&self) -> usize {
        let modules = std::mem::take(&mut *self.modules.lock().unwrap_or_else(|p| p.into_inner()));
        if modules.is_empty() {
            return 0;
        }
        let n = modules.len();
        if self.host.generation() != self.generation {
            self.host
                .counters
                .live_modules
                .fetch_sub(n as u64, Ordering::Relaxed);
            return 0;
        }
        let host = Arc::clone(&self.host);
        let generation = self.generation;
        self.host
            .defer(Box::new(move || unload_now(&host, generation, modules)));
        n
    }
}

/// Unloads `modules` of `generation` (on the host's release thread); they stop counting as live
/// whether or not that succeeds. Failures are drop errors, as they were when the last handle's
/// thread made them.
fn unload_now(host: &Host, generation: u64, modules: Vec<(String, SendModule)>) {
    host.counters
        .live_modules
        .fetch_sub(modules.len() as u64, Ordering::Relaxed);
    match host.enter_for(generation) {
        Ok(_) => {}
        // Died with their context: never unloaded (see `Core::queue_unloads`).
        Err(Error::ContextLost { .. }) => return,
        Err(e) => return host.drop_error("binding the context to unload modules", &e),
    }
    for (name, m) in modules {
        if let Err(e) = module::unload(host, m.0) {
            host.drop_error(&format!("unloading module '{name}'"), &e);
        }
    }
}

/// A module handle on its way to the release thread.
pub(crate) struct SendModule(pub(crate) CUmodule);

// SAFETY: a module handle is a driver object usable from any thread with its context bound;
// the release thread binds it before unloading, and nothing else holds the handle then.
unsafe impl Send for SendModule {}

impl Drop for Core {
    fn drop(&mut self) {
        self.queue_unloads();
    }
}

/// Keeps a registry's modules loaded while a launch is pending.
pub(crate) struct LaunchGuard {
    core: Arc<Core>,
}

impl Drop for LaunchGuard {
    fn drop(&mut self) {
        if self.core.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The last one out: take the lock so a waiter between its check and its wait
            // cannot miss this notify.
            let _g = self
                .core
                .idle_lock
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.core.drained.notify_all();
        }
    }
}

/// The kernel modules of one model, loaded in one host's context.
pub struct Registry {
    name: String,
    host: Arc<Host>,
    generation: u64,
    pub(crate) core: Arc<Core>,
    /// Kernels by name. Every request of a model looks its kernels up here, so lookups share a
    /// read lock; only a binary-only module's kernel, found on its first use, writes.
    kernels: RwLock<HashMap<String, Arc<KernelEntry>>>,
    /// The kernels handed out and not dropped yet, by holder id, in [`HOLDER_SHARDS`] shards.
    pub(crate) holders: [Mutex<Holders>; HOLDER_SHARDS],
    next_holder: AtomicU64,
}

/// Shards of a registry's holder table (a holder's id picks its shard). Every request of a model
/// takes and drops kernel handles, and with one lock for all of them a handle cost 5.6 µs to
/// take and 4.5 µs to drop at 16 connections of `gpuhost serve` on the H200, against 1.1 and 0.5
/// at one (helper serve-cpu2's host-call metrics, session 20).
pub(crate) const HOLDER_SHARDS: usize = 8;

/// One shard of the kernels handed out and not dropped yet, for release's report: each with its
/// entry (its name, without copying it per take) and its holder's label.
#[derive(Default)]
pub(crate) struct Holders {
    pub(crate) by_id: BTreeMap<u64, (Arc<KernelEntry>, String)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("name", &self.name)
            .field("device", &self.host.ordinal())
            .field("generation", &self.generation)
            .finish()
    }
}

impl Registry {
    /// Load a bundle directory (`manifest.toml` + module files), picking for each module the
    /// cubin for this device's architecture, else the fatbin, else the PTX.
    pub fn load(host: &Arc<Host>, bundle_dir: impl AsRef<Path>) -> Result<Arc<Registry>> {
        let (name, sources) = read_bundle(bundle_dir.as_ref(), &host.facts().sm_tag())?;
        Self::from_sources(host, name, sources)
    }

    /// Load in-memory modules as one registry.
    pub fn from_sources(
        host: &Arc<Host>,
        name: impl Into<String>,
        sources: Vec<ModuleSource>,
    ) -> Result<Arc<Registry>> {
        let driver_params = has_symbol("cuFuncGetParamInfo");
        let name = name.into();
        host.fresh(|| Self::load_sources(host, name.clone(), &sources, driver_params))
    }

    /// `from_sources`, choosing whether parameter lists come from the driver (when it can say)
    /// or from the PTX signatures.
    fn load_sources(
        host: &Arc<Host>,
        name: String,
        sources: &[ModuleSource],
        driver_params: bool,
    ) -> Result<Arc<Registry>> {
        let generation = host.enter()?;
        let core = Arc::new(Core {
            host: host.clone(),
            generation,
            modules: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
            idle_lock: Mutex::new(()),
            drained: Condvar::new(),
        });
        let mut kernels = HashMap::new();
        for src in sources {
            // Dropping `core` on an early return unloads what was loaded so far.
            let m = module::load(host, src)?;
            Counters::inc(&host.counters.live_modules);
            core.modules
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((src.name.clone(), SendModule(m)));
            let Some(ptx) = src.ptx() else { continue };
            let sigs = ptx_sig::entries(ptx).map_err(|log| Error::InvalidModule {
                module: src.name.clone(),
                file: src.file.clone(),
                log: format!("cannot read the PTX entry signatures: {log}"),
            })?;
            for sig in sigs {
                let func =
                    get_function(host, m, &sig.name)?.ok_or_else(|| Error::InvalidModule {
                        module: src.name.clone(),
                        file: src.file.clone(),
                        log: format!(
                            "the loaded image has no function '{}' although its PTX declares it",
                            sig.name
                        ),
                    })?;
                let (params, source) =
                    match driver_params.then(|| driver_param_info(func)).flatten() {
                        Some(p) => (p, ParamSource::Driver),
                        None => (sig.params, ParamSource::Ptx),
                    };
                kernels.insert(
                    sig.name.clone(),
                    Arc::new(KernelEntry {
                        name: sig.name,
                        func,
                        params,
                        source,
                    }),
                );
            }
        }
        Ok(Arc::new(Registry {
            name,
            host: host.clone(),
            generation,
            core,
            kernels: RwLock::new(kernels),
            holders: Default::default(),
            next_holder: AtomicU64::new(0),
        }))
    }

    /// The registry's name (from the manifest or `from_sources`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host (and so the device) the registry is loaded on.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The context generation the modules were loaded in.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Names of the kernels known so far (all PTX entries; binary-only kernels once looked up).
    pub fn kernel_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .kernels
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// Take a kernel (unlabelled holder).
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel> {
        self.kernel_labeled(name, "")
    }

    /// Take a kernel, recording `label` (e.g. a request id) as its holder for release's report.
    pub fn kernel_labeled(self: &Arc<Self>, name: &str, label: &str) -> Result<Kernel> {
        self.host.enter_for(self.generation)?;
        let entry = self.lookup(name)?;
        let id = self.next_holder.fetch_add(1, Ordering::Relaxed);
        // Made before the lock: the shard is held for the insert only.
        let held = (entry.clone(), label.to_string());
        self.holder_shard(id).by_id.insert(id, held);
        Ok(Kernel {
            registry: self.clone(),
            entry,
            holder: id,
        })
    }

    /// The locked shard of holder `id`.
    fn holder_shard(&self, id: u64) -> std::sync::MutexGuard<'_, Holders> {
        let shard = &self.holders[(id % HOLDER_SHARDS as u64) as usize];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lookup(&self, name: &str) -> Result<Arc<KernelEntry>> {
        let known = self.kernels.read().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = known.get(name) {
            return Ok(e.clone());
        }
        drop(known);
        let mut kernels = self.kernels.write().unwrap_or_else(|p| p.into_inner());
        // Another thread may have found it meanwhile.
        if let Some(e) = kernels.get(name) {
            return Ok(e.clone());
        }
        // Binary-only modules: their kernels are found by name on first use.
        let modules = self.core.modules.lock().unwrap_or_else(|p| p.into_inner());
        for (_, m) in modules.iter() {
            if let Some(func) = get_function(&self.host, m.0, name)? {
                let params = driver_param_info(func).ok_or_else(|| Error::InvalidModule {
                    module: name.to_string(),
                    file: None,
                    log: "kernel comes from a binary-only module and this driver lacks cuFuncGetParamInfo: add its PTX to the bundle so its parameters can be checked".into(),
                })?;
                let e = Arc::new(KernelEntry {
                    name: name.to_string(),
                    func,
                    params,
                    source: ParamSource::Driver,
                });
                kernels.insert(name.to_string(), e.clone());
                return Ok(e);
            }
        }
        let mut available: Vec<String> = kernels.keys().cloned().collect();
        available.sort();
        Err(Error::KernelNotFound {
            name: name.to_string(),
            registry: self.name.clone(),
            available,
        })
    }
}

fn get_function(host: &Host, m: CUmodule, name: &str) -> Result<Option<CUfunction>> {
    let Ok(c) = std::ffi::CString::new(name) else {
        return Ok(None);
    };
    // SAFETY: m is a loaded module of the bound context.
    match unsafe { result::module::function(m, &c) } {
        Err(e) if e.is(CUresult::CUDA_ERROR_NOT_FOUND) => Ok(None),
        r => host.check(r).map(Some),
    }
}

/// Parameter offsets and sizes from the driver; None when it cannot say (or lacks the optional
/// cuFuncGetParamInfo, which cudarc would panic calling).
fn driver_param_info(func: CUfunction) -> Option<Vec<ParamInfo>> {
    if !has_symbol("cuFuncGetParamInfo") {
        return None;
    }
    let mut params = Vec::new();
    for i in 0..4096usize {
        // SAFETY: func is a live function of the bound context; the driver exports the entry
        // point (checked above).
        match unsafe { result::module::param_info(func, i) } {
            Ok((offset, size)) => params.push(ParamInfo {
                offset: offset as u32,
                size: size as u32,
            }),
            // Past the last parameter.
            Err(e) if e.is(CUresult::CUDA_ERROR_INVALID_VALUE) => return Some(params),
            Err(_) => return None,
        }
    }
    None
}

/// A kernel of a registry. Keeps the registry alive; recorded as a holder (name + label).
pub struct Kernel {
    registry: Arc<Registry>,
    entry: Arc<KernelEntry>,
    holder: u64,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.entry.name)
            .field("registry", &self.registry.name)
            .field("params", &self.entry.params)
            .finish()
    }
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// Its parameters (offsets and sizes).
    pub fn params(&self) -> &[ParamInfo] {
        &self.entry.params
    }

    /// Checks `cfg` against the device's limits and `args` against the parameters (count, sizes,
    /// buffer offsets) exactly as `Stream::launch` will, without launching: for callers that
    /// bind a launch once and enqueue it many times, so a mistake surfaces where it was made.
    pub fn check_launch(&self, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        cfg.check(self.name(), self.host().facts())?;
        crate::launch::check_args(self.name(), self.params(), args)
    }

    /// [`Kernel::check_launch`] for a caller that appends the kernel's last parameters itself
    /// (a sandbox's hidden arguments, laid out by the caller and checked when launched): `cfg`,
    /// and `args` against the leading parameters, one each.
    pub fn check_launch_leading(&self, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        cfg.check(self.name(), self.host().facts())?;
        match self.params().get(..args.len()) {
            Some(leading) => crate::launch::check_args(self.name(), leading, args),
            // More arguments than parameters: the count's own refusal.
            None => crate::launch::check_count(self.name(), self.params(), args),
        }
    }

    /// Where the parameter list came from.
    pub fn param_source(&self) -> ParamSource {
        self.entry.source
    }

    /// The registry it belongs to.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The context generation it was loaded in.
    pub fn generation(&self) -> u64 {
        self.registry.generation
    }

    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.registry.host
    }

    /// The raw function handle (for interop and benchmarks; valid while this Kernel lives and its
    /// generation is current).
    pub fn raw(&self) -> CUfunction {
        self.entry.func
    }

    /// True when `guard` keeps this kernel's modules loaded.
    #[inline]
    pub(crate) fn guarded_by(&self, guard: &LaunchGuard) -> bool {
        Arc::ptr_eq(&guard.core, &self.registry.core)
    }

    pub(crate) fn launch_guard(&self) -> LaunchGuard {
        let core = self.registry.core.clone();
        core.pending.fetch_add(1, Ordering::SeqCst);
        LaunchGuard { core }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Dropped after the shard's lock: the last handle of an entry may free it.
        let held = self
            .registry
            .holder_shard(self.holder)
            .by_id
            .remove(&self.holder);
        drop(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ModuleImage;

    const PTX: &str = include_str!("../bundles/stamp-a/stamp.ptx");

    /// Both sources of parameter lists, on the same kernels: they must agree (needs a driver;
    /// softcuda in CI).
    #[test]
    fn ptx_and_driver_parameter_lists_agree() {
        let host = match crate::host(0) {
            Ok(h) => h,
            Err(Error::NoDriver { reason }) => {
                println!("skipped: no driver ({reason})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let src = || vec![ModuleSource::new("m", ModuleImage::Ptx(PTX.into()))];
        let from_ptx = Registry::load_sources(&host, "ptx".into(), &src(), false).unwrap();
        let has_driver = has_symbol("cuFuncGetParamInfo");
        let from_driver = Registry::load_sources(&host, "drv".into(), &src(), true).unwrap();
        for name in ["stamp", "noop", "poke", "mixed"] {
            let a = from_ptx.kernel(name).unwrap();
            let b = from_driver.kernel(name).unwrap();
            assert_eq!(a.param_source(), ParamSource::Ptx);
            if has_driver {
                assert_eq!(b.param_source(), ParamSource::Driver, "{name}");
            }
            assert_eq!(a.params(), b.params(), "{name}");
        }
        let mixed = from_ptx.kernel("mixed").unwrap();
        assert_eq!(
            mixed.params().iter().map(|p| p.offset).collect::<Vec<_>>(),
            [0, 8, 16, 24]
        );
    }
}
