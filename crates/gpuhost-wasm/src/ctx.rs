//! The per-guest state of gpuhost:cuda, modelled on wasmtime-wasi: a [`CudaCtx`] (device,
//! quotas, usage) lives in the Store's data beside a `ResourceTable`; [`CudaView`] lends both to
//! the host functions, and [`add_to_linker`] wires every gpuhost:cuda interface in one call.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, ResourceTable};

use crate::bindings::gpuhost::cuda;
use crate::bundle_rewrite::BundleRewrite;
use crate::calls::{CallObserver, CallTimer, HostCall};
use crate::confine::{Confinement, SandboxModule};
use crate::limits::{Limits, Usage};
use crate::module_cache::ModuleCache;
use crate::pool::SandboxPool;
use crate::watchdog::StoreWatch;

/// gpuhost:cuda state of one guest: the device it uses, its quotas and what it holds.
pub struct CudaCtx {
    pub(crate) host: Arc<gpuhost::Host>,
    pub(crate) limits: Limits,
    pub(crate) usage: Usage,
    pub(crate) quota_refusals: u32,
    pub(crate) last_refusal: Option<String>,
    /// The stream buffer transfers run on (see memory.rs), made on first use.
    pub(crate) transfer: Option<Arc<gpuhost::Stream>>,
    /// Bytes of the guest's linear memories page-locked, across them all (guest_memory/tally.rs),
    /// against `Limits::max_locked_memory_bytes`; shared with the memories made for the guest.
    pub(crate) locked: crate::guest_memory::SharedTally,
    /// The guest's open stream reads (see stream_read.rs).
    pub(crate) reads: crate::stream_read::OpenReads,
    /// The bundle whose kernels gpuhost:cuda/bundle hands out (see bundle.rs), if granted.
    pub(crate) bundle: Option<Arc<gpuhost::Registry>>,
    /// The sandbox's rewrite of that bundle, when it was granted for sandboxed guests.
    pub(crate) bundle_rewrite: Option<Arc<BundleRewrite>>,
    /// This guest's globals of each rewritten bundle module, made at its first kernel there.
    pub(crate) bundle_modules: Vec<Option<Arc<SandboxModule>>>,
    /// Kernel launches enqueued so far (an embedder's per-guest metric).
    pub(crate) launches: u64,
    /// Launches of streams the guest dropped, still running and counted (see stream.rs).
    pub(crate) orphans: Vec<crate::stream::Orphan>,
    /// Graphs replaying this guest's launch bursts (burst/).
    pub(crate) graphs: crate::burst::GraphCache,
    /// The sandbox of this guest (`Limits::sandbox`), made on first use.
    pub(crate) confine: Option<Confinement>,
    /// Where the sandbox's arena and control block come from and go back to, if pooled.
    pub(crate) sandbox_pool: Option<Arc<SandboxPool>>,
    /// Sees every host call of this guest, timed (see calls.rs), if the embedder asked.
    pub(crate) calls: Option<Arc<dyn CallObserver>>,
    /// Sandboxed modules this guest shares with the embedder's other Stores (module_cache.rs).
    pub(crate) modules: Option<Arc<ModuleCache>>,
}

impl CudaCtx {
    /// A context on `host` with `limits`.
    pub fn new(host: Arc<gpuhost::Host>, limits: Limits) -> Self {
        Self {
            host,
            usage: Usage::default(),
            quota_refusals: 0,
            last_refusal: None,
            transfer: None,
            locked: Default::default(),
            reads: Default::default(),
            bundle: None,
            bundle_rewrite: None,
            bundle_modules: Vec::new(),
            launches: 0,
            orphans: Vec::new(),
            graphs: crate::burst::GraphCache::new(limits.max_cached_graphs),
            confine: None,
            sandbox_pool: None,
            calls: None,
            modules: None,
            limits,
        }
    }

    /// Takes this guest's sandbox arena and control block from `pool` (reset for it) and gives
    /// them back when the Store is dropped, instead of making and freeing its own. Ignored
    /// unless the pool was made for this context's device and limits.
    pub fn with_sandbox_pool(mut self, pool: Arc<SandboxPool>) -> Self {
        self.sandbox_pool = Some(pool);
        self
    }

    /// Shares this guest's sandboxed modules with the other Stores given `cache`: a module
    /// loaded from PTX text that one of them loaded before is neither rewritten nor loaded
    /// again. Give one cache to Stores of one tenant only: a guest can time its loads and so
    /// tell which texts the others loaded ([`ModuleCache`]). Trusted guests' modules are never
    /// shared.
    pub fn with_module_cache(mut self, cache: Arc<ModuleCache>) -> Self {
        self.modules = Some(cache);
        self
    }

    /// Reports each gpuhost:cuda call of this guest to `observer`, with the time it took.
    pub fn with_call_observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.calls = Some(observer);
        self
    }

    /// Starts timing one host call (reported when the returned timer is dropped).
    pub(crate) fn time(&self, call: HostCall) -> CallTimer {
        CallTimer::start(self.calls.as_ref(), call)
    }

    /// Grants the guest the kernels of `bundle` (loaded by the embedder on this context's
    /// device) through gpuhost:cuda/bundle. Many Stores may share one registry: nothing is
    /// loaded or JIT-compiled per guest.
    /// The grant of a trusted guest: a sandboxed one refuses a bundle the sandbox has not
    /// rewritten (its kernels would run unconfined on the guest's scalars).
    pub fn with_bundle(mut self, bundle: Arc<gpuhost::Registry>) -> Self {
        self.bundle = Some(bundle);
        self.bundle_rewrite = None;
        self
    }

    /// Grants a sandboxed guest the kernels of a bundle loaded with [`BundleRewrite::load`]
    /// (`registry` and `rewrite` as it returned them; many Stores may share both): they run
    /// confined to the guest's memory like its own modules.
    pub fn with_sandboxed_bundle(
        mut self,
        registry: Arc<gpuhost::Registry>,
        rewrite: Arc<BundleRewrite>,
    ) -> Self {
        self.bundle = Some(registry);
        self.bundle_rewrite = Some(rewrite);
        self
    }

    /// Kernel launches this guest has enqueued so far.
    pub fn launches(&self) -> u64 {
        self.launches
    }

    /// Launches of this guest replayed through CUDA graphs so far.
    pub fn graph_launches(&self) -> u64 {
        self.graphs.launches()
    }

    /// The device this guest uses.
    pub fn host(&self) -> &Arc<gpuhost::Host> {
        &self.host
    }

    /// The guest's quotas.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What the guest holds now.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// The most launches one graph batch of this guest holds (burst/): `max_graph_batch`, and
    /// for a sandboxed guest at most one watched segment.
    pub(crate) fn max_batch(&self) -> u32 {
        if self.limits.sandbox {
            self.limits
                .max_graph_batch
                .min(crate::watchdog::FENCE_EVERY)
        } else {
            self.limits.max_graph_batch
        }
    }

    /// The guest's sandbox (its arena, control block and watch), made on first use; None for a
    /// trusted guest.
    pub(crate) fn confinement(&mut self) -> Result<Option<&mut Confinement>, gpuhost::Error> {
        if !self.limits.sandbox {
            return Ok(None);
        }
        if self.confine.is_none() {
            self.confine = Some(match &self.sandbox_pool {
                Some(pool) if pool.serves(&self.host, &self.limits) => {
                    pool.confinement(&self.limits)?
                }
                _ => Confinement::new(&self.host, &self.limits)?,
            });
        }
        Ok(self.confine.as_mut())
    }

    /// Takes the guest's sandbox now rather than at its first device call: an embedder that
    /// makes a Store ahead of its guest (`gpuhost serve`'s warm Stores) moves the sandbox's
    /// making — or, from a [`SandboxPool`] with no reset pair ready, a new pair's — out of the
    /// request. Nothing for a trusted guest, or one whose sandbox is already taken.
    pub fn prepare_sandbox(&mut self) -> Result<(), crate::Error> {
        self.confinement()?;
        Ok(())
    }

    /// [`CudaCtx::prepare_sandbox`] for an embedder that makes Stores on a task: from a
    /// [`SandboxPool`] with no reset pair ready, the task waits for one on its way back (its
    /// zeroing, or, once the pool holds its bound, the resetter's next pass; at most
    /// [`crate::MAX_WAIT`]) rather than make a new pair. Under load, making pairs is what
    /// sank `gpuhost serve` (pool/lend.rs says how).
    pub async fn prepare_sandbox_waiting(&mut self) -> Result<(), crate::Error> {
        if !self.limits.sandbox || self.confine.is_some() {
            return Ok(());
        }
        match &self.sandbox_pool {
            Some(pool) if pool.serves(&self.host, &self.limits) => {
                let pool = pool.clone();
                self.confine = Some(pool.confinement_waiting(&self.limits).await?);
                Ok(())
            }
            _ => self.prepare_sandbox(),
        }
    }

    /// The watch of this guest's launches, for waiting until they end after the Store is gone.
    pub(crate) fn watch(&self) -> Option<Arc<StoreWatch>> {
        self.confine.as_ref().map(|c| c.watch.clone())
    }

    /// How many calls a quota refused, and the last refusal's message (for the embedder's
    /// diagnostics: the guest itself got each as a `quota-exceeded` error).
    pub fn quota_refusals(&self) -> (u32, Option<&str>) {
        (self.quota_refusals, self.last_refusal.as_deref())
    }
}

/// The context and the resource table, borrowed together for one host call.
pub struct CudaCtxView<'a> {
    /// The gpuhost:cuda state.
    pub ctx: &'a mut CudaCtx,
    /// The Store's resource table (shared with WASI); guest handles index into it.
    pub table: &'a mut ResourceTable,
}

/// Implemented by a Store's data type to give gpuhost:cuda its state.
pub trait CudaView: Send {
    /// Borrow the gpuhost:cuda context and the resource table.
    fn cuda(&mut self) -> CudaCtxView<'_>;
}

/// Marker tying [`CudaCtxView`] to wasmtime's `HasData` projection.
pub struct HasCuda;

impl HasData for HasCuda {
    type Data<'a> = CudaCtxView<'a>;
}

/// Adds every gpuhost:cuda@0.1.0 interface to `linker`. The engine needs async support
/// (`synchronize` is async); call guests with the `_async` APIs. Leaves the linker's name
/// shadowing off (`buffer.write` and `stream.launch` are defined twice: see memory.rs and
/// arg_list.rs).
///
/// Call [`gpuhost::Host::reserve_staging`] with the number of guests that may transfer at once,
/// before they run, so no guest transfer page-locks memory ([`Runtime::new`](crate::Runtime::new)
/// reserves for one).
pub fn add_to_linker<T: CudaView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    fn get<T: CudaView>(t: &mut T) -> CudaCtxView<'_> {
        t.cuda()
    }
    cuda::types::add_to_linker::<T, HasCuda>(linker, get)?;
    cuda::device::add_to_linker::<T, HasCuda>(linker, get)?;
    cuda::module::add_to_linker::<T, HasCuda>(linker, get)?;
    cuda::memory::add_to_linker::<T, HasCuda>(linker, get)?;
    crate::memory::add_zero_copy_write(linker)?;
    crate::stream_read::add_read_stream(linker)?;
    cuda::stream::add_to_linker::<T, HasCuda>(linker, get)?;
    crate::arg_list::add_launch_in_place(linker)?;
    cuda::bundle::add_to_linker::<T, HasCuda>(linker, get)?;
    Ok(())
}
