//! gpuhost:cuda/module: device code loaded from PTX or cubin bytes, and kernels looked up in it.
//! A module is a one-module gpuhost `Registry`; a kernel handle keeps it loaded, and counted in
//! the guest's module quota, after the module handle is dropped.

use crate::calls::HostCall;
use std::sync::Arc;

use gpuhost::{ModuleImage, ModuleSource, Registry};
use wasmtime::component::Resource;

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::module::{Host, HostKernel, HostModule, ParamInfo};
use crate::blocking::off_worker;
use crate::confine::{KernelSandbox, SandboxModule};
use crate::ctx::CudaCtxView;
use crate::error::{CudaResult, from_gpu};
use crate::limits::{Charge, GlobalsCharge};
use crate::module_cache;

/// Where a sandboxed load's module comes from.
enum Source {
    /// The embedder's module cache (module_cache.rs).
    Cached(module_cache::Shared),
    /// A rewrite made now, to load.
    Rewritten(Box<ptxvm::sandbox::Sandboxed>),
}

/// A guest's loaded module: the registry holding it and its share of the module quota.
pub struct ModuleRes {
    pub(crate) registry: Arc<Registry>,
    charge: Charge,
    /// Its globals block and rewritten kernels, for a sandboxed guest.
    sandbox: Option<Arc<SandboxModule>>,
}

/// A guest's kernel handle, with its share of its module's quota.
pub struct KernelRes {
    /// Shared with the launches of it collected for a graph (burst/).
    pub(crate) kernel: Arc<gpuhost::Kernel>,
    pub(crate) charge: Charge,
    /// What a launch of it needs beyond the user's arguments, for a sandboxed guest.
    /// Shared with its bound launches and the launches collected for a graph.
    pub(crate) sandbox: Option<Arc<KernelSandbox>>,
}

impl CudaCtxView<'_> {
    fn load(
        &mut self,
        image: ModuleImage,
        bytes: u64,
        is_ptx: bool,
    ) -> CudaResult<Resource<ModuleRes>> {
        self.ctx.usage.add_module(&self.ctx.limits, bytes)?;
        let loaded = match image {
            ModuleImage::Ptx(ptx) if self.ctx.limits.sandbox => self.sandboxed(&ptx),
            image => self.registry(image, is_ptx).map(|r| (r, 0, None)),
        };
        let pushed = loaded.and_then(|(registry, globals, sandbox)| {
            let res = ModuleRes {
                registry,
                charge: Charge::module(bytes, globals),
                sandbox,
            };
            // On failure the charge drops with `res`, unreleased: give its globals back here.
            self.table.push(res).map_err(|e| {
                self.ctx.usage.remove_globals(globals);
                e.into()
            })
        });
        if pushed.is_err() {
            self.ctx.usage.remove_module(bytes);
        }
        pushed
    }

    /// Loads one image as a one-module registry. The driver's JIT of PTX takes milliseconds to
    /// seconds, off the executor's worker (blocking.rs).
    fn registry(&mut self, image: ModuleImage, is_ptx: bool) -> CudaResult<Arc<Registry>> {
        let source = ModuleSource::new("guest", image);
        let host = &self.ctx.host;
        off_worker(|| Registry::from_sources(host, "guest", vec![source])).map_err(|e| {
            match (&e, is_ptx) {
                (gpuhost::Error::InvalidModule { log, .. }, true) => {
                    WitError::InvalidPtx(log.clone())
                }
                _ => from_gpu(&e),
            }
            .into()
        })
    }

    /// Rewrites `ptx` with the sandbox and loads the rewritten text (or takes both from the
    /// embedder's module cache), then reserves and fills the guest's own globals block of it in
    /// its arena (counted in the globals quota; the returned count is what was reserved).
    fn sandboxed(
        &mut self,
        ptx: &str,
    ) -> CudaResult<(Arc<Registry>, u64, Option<Arc<SandboxModule>>)> {
        let source = match self.cached(ptx)? {
            Some(shared) => Source::Cached(shared),
            // About a millisecond per 100 KB of PTX (issue #9), off the worker (blocking.rs).
            None => Source::Rewritten(Box::new(off_worker(|| crate::confine::rewrite(ptx))?)),
        };
        // Its kernels launch with the guest's arena and control block: make them now.
        self.ctx.confinement()?;
        let size = match &source {
            Source::Cached(shared) => shared.globals.size,
            Source::Rewritten(r) => r.globals.size,
        };
        // Quota first: globals over it are refused before the driver loads anything.
        let mut charge = GlobalsCharge::new(self, size)?;
        let shared = match source {
            Source::Cached(shared) => shared,
            Source::Rewritten(r) => {
                let ptxvm::sandbox::Sandboxed {
                    ptx: text,
                    kernels,
                    globals,
                } = *r;
                let shared = module_cache::Shared {
                    registry: charge.registry(ModuleImage::Ptx(text), true)?,
                    globals: Arc::new(globals),
                    kernels: kernels.into(),
                };
                if let Some(cache) = &charge.ctx.modules {
                    cache.insert(ptx, shared.clone());
                }
                shared
            }
        };
        let globals = charge.globals_block(&shared.globals)?;
        let module = SandboxModule {
            globals,
            kernels: shared.kernels,
        };
        Ok((shared.registry, charge.commit(), Some(Arc::new(module))))
    }

    /// The module loaded from `ptx` on this guest's device in its current context generation, if
    /// the embedder's cache has it.
    fn cached(&self, ptx: &str) -> CudaResult<Option<module_cache::Shared>> {
        let Some(cache) = self.ctx.modules.as_ref() else {
            return Ok(None);
        };
        // Entering notices a context lost since the last call (another part of the process
        // reset it) and moves the generation on, so the lost context's entry is a miss rather
        // than a module whose handles are dead.
        let generation = self.ctx.host.enter().map_err(|e| from_gpu(&e))?;
        Ok(cache.get(ptx, &self.ctx.host, generation))
    }

    /// A module's globals block for this guest: in its arena, zeroed, then its initial image.
    pub(crate) fn globals_block(
        &mut self,
        layout: &ptxvm::sandbox::GlobalsLayout,
    ) -> CudaResult<Option<gpuhost::DeviceBuffer>> {
        if layout.size == 0 {
            return Ok(None);
        }
        let Some(c) = self.ctx.confinement()? else {
            return Ok(None);
        };
        // Arena allocations are 256-aligned: enough for any PTX variable (the layout asks >= 16).
        let block = c.arena.alloc(layout.size)?;
        // The block is zeroed: only the image from its first non-zero byte is written (a
        // table after 64 KiB of zero-initialised counters is a 16-byte write, not 64 KiB).
        if let Some(first) = layout.init.iter().position(|&b| b != 0) {
            block.write(first, &layout.init[first..])?;
        }
        Ok(Some(block))
    }
}

impl HostModule for CudaCtxView<'_> {
    fn from_ptx(&mut self, ptx: String) -> CudaResult<Resource<ModuleRes>> {
        let _timer = self.ctx.time(HostCall::ModuleFromPtx);
        let bytes = ptx.len() as u64;
        self.load(ModuleImage::Ptx(ptx), bytes, true)
    }

    fn from_cubin(&mut self, image: Vec<u8>) -> CudaResult<Resource<ModuleRes>> {
        let _timer = self.ctx.time(HostCall::ModuleFromCubin);
        if self.ctx.limits.sandbox {
            return Err(WitError::BinaryRefused(format!(
                "this guest is sandboxed and may load PTX text only: a cubin or fatbin ({} bytes) cannot be checked for accesses outside the guest's memory; load the module's PTX with from-ptx, or ask the embedder to run the guest trusted (gpuhost run --trusted)",
                image.len()
            ))
            .into());
        }
        let bytes = image.len() as u64;
        // Quota first (a cheap refusal of huge images), then the structure the driver relies on.
        let limit = self.ctx.limits.max_ptx_bytes;
        if bytes > limit {
            return Err(WitError::QuotaExceeded(format!(
                "a module image of {bytes} bytes is over the guest's limit of {limit}"
            ))
            .into());
        }
        crate::image::check(&image)?;
        self.load(ModuleImage::Cubin(image), bytes, false)
    }

    fn kernel(
        &mut self,
        module: Resource<ModuleRes>,
        name: String,
    ) -> CudaResult<Resource<KernelRes>> {
        let _timer = self.ctx.time(HostCall::ModuleKernel);
        let m = self.table.get(&module)?;
        let kernel = Arc::new(m.registry.kernel(&name)?);
        let sandbox = match (&m.sandbox, self.ctx.confine.as_mut()) {
            (Some(sm), Some(c)) => {
                let Some(k) = sm.kernels.iter().find(|k| k.name == name) else {
                    return Err(WitError::KernelNotFound(format!(
                        "the sandboxed module has no kernel {name}"
                    ))
                    .into());
                };
                let skip_copy = match &k.skip_copy {
                    Some(copy) => Some(Arc::new(m.registry.kernel(copy)?)),
                    None => None,
                };
                let (tag, name) = c.tag(&name);
                Some(Arc::new(KernelSandbox {
                    module: sm.clone(),
                    user_params: k.user_params,
                    local_bytes: k.local_bytes_per_thread,
                    tag,
                    name,
                    first_poll_span: k.first_poll_span,
                    skip_copy,
                    copy_counts_start: k.copy_counts_start,
                }))
            }
            _ => None,
        };
        let res = KernelRes {
            kernel,
            charge: m.charge.clone(),
            sandbox,
        };
        self.ctx.usage.add_kernel(&self.ctx.limits)?;
        self.table.push(res).map_err(|e| {
            self.ctx.usage.remove_kernel();
            e.into()
        })
    }

    fn drop(&mut self, module: Resource<ModuleRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::ModuleDrop);
        let m = self.table.delete(module)?;
        m.charge.release(&mut self.ctx.usage);
        Ok(())
    }
}

impl HostKernel for CudaCtxView<'_> {
    fn name(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<String> {
        let _timer = self.ctx.time(HostCall::KernelName);
        Ok(self.table.get(&kernel)?.kernel.name().to_string())
    }

    fn params(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<Vec<ParamInfo>> {
        let _timer = self.ctx.time(HostCall::KernelParams);
        let k = self.table.get(&kernel)?;
        // A sandboxed kernel shows the user's parameters only (the hidden ones follow them).
        let shown = k.sandbox.as_ref().map_or(usize::MAX, |s| s.user_params);
        Ok(k.kernel
            .params()
            .iter()
            .take(shown)
            .map(|p| ParamInfo {
                offset: p.offset,
                size: p.size,
            })
            .collect())
    }

    fn drop(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::KernelDrop);
        let k = self.table.delete(kernel)?;
        k.charge.release(&mut self.ctx.usage);
        self.ctx.usage.remove_kernel();
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}
