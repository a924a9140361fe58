//! gpuhost:cuda/bundle: kernels of a bundle the embedder loaded and granted to this guest
//! ([`crate::CudaCtx::with_bundle`], or rewritten for sandboxed guests:
//! [`crate::CudaCtx::with_sandboxed_bundle`]). The registry is shared by every Store it is
//! granted to, so a guest gets a kernel without loading or JIT-compiling anything; the handle
//! counts against the guest's kernel quota (and a sandboxed guest's copy of the module's globals
//! against its globals quota).

use crate::calls::HostCall;
use std::sync::Arc;

use wasmtime::component::Resource;

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::bundle::Host;
use crate::confine::{KernelSandbox, SandboxModule};
use crate::ctx::CudaCtxView;
use crate::error::CudaResult;
use crate::limits::{Charge, GlobalsCharge};
use crate::module::KernelRes;

impl CudaCtxView<'_> {
    /// The sandbox side of bundle kernel `name` for this guest: the rewritten kernel's facts and
    /// the guest's own globals of its module (made now if this is its first kernel there).
    fn bundle_sandbox(&mut self, name: &str) -> CudaResult<KernelSandbox> {
        let Some(rewrite) = self.ctx.bundle_rewrite.clone() else {
            return Err(WitError::NotSupported(format!(
                "this guest is sandboxed, and the bundle granted to it was not rewritten for the \
                 sandbox, so its kernel `{name}` would run unconfined: the embedder must grant it \
                 with CudaCtx::with_sandboxed_bundle (gpuhost serve does)"
            ))
            .into());
        };
        let Some((module, kernel)) = rewrite.kernels.get(name) else {
            return Err(WitError::KernelNotFound(format!(
                "the granted bundle has no kernel `{name}`"
            ))
            .into());
        };
        let globals = match self.ctx.bundle_modules.get(*module).cloned().flatten() {
            Some(m) => m,
            None => {
                let layout = &rewrite.modules[*module];
                self.ctx.confinement()?;
                let mut charge = GlobalsCharge::new(self, layout.size)?;
                let block = charge.globals_block(layout)?;
                charge.commit();
                let m = Arc::new(SandboxModule {
                    globals: block,
                    kernels: Arc::from([]),
                });
                let slots = &mut self.ctx.bundle_modules;
                if slots.len() <= *module {
                    slots.resize(*module + 1, None);
                }
                slots[*module] = Some(m.clone());
                m
            }
        };
        let skip_copy = match (&kernel.skip_copy, &self.ctx.bundle) {
            (Some(copy), Some(bundle)) => Some(Arc::new(bundle.kernel(copy)?)),
            _ => None,
        };
        let Some(c) = self.ctx.confinement()? else {
            return Err(WitError::Driver("the guest's sandbox is gone".into()).into());
        };
        let (tag, name) = c.tag(name);
        Ok(KernelSandbox {
            module: globals,
            user_params: kernel.user_params,
            local_bytes: kernel.local_bytes_per_thread,
            tag,
            name,
            first_poll_span: kernel.first_poll_span,
            skip_copy,
            copy_counts_start: kernel.copy_counts_start,
        })
    }
}

impl Host for CudaCtxView<'_> {
    fn kernel_names(&mut self) -> wasmtime::Result<Vec<String>> {
        let _timer = self.ctx.time(HostCall::BundleKernelNames);
        let mut names = match &self.ctx.bundle {
            // A sandboxed bundle's skip copies are the host's, not kernels a guest may name.
            Some(bundle) => bundle
                .kernel_names()
                .into_iter()
                .filter(|n| !n.ends_with(ptxvm::sandbox::SKIP_COPY_SUFFIX))
                .collect(),
            None => Vec::new(),
        };
        names.sort();
        Ok(names)
    }

    fn get_kernel(&mut self, name: String) -> CudaResult<Resource<KernelRes>> {
        let _timer = self.ctx.time(HostCall::BundleGetKernel);
        let Some(bundle) = &self.ctx.bundle else {
            return Err(WitError::KernelNotFound(format!(
                "no bundle was granted to this guest, so it has no kernel `{name}`: load the \
                 module yourself (module.from-ptx) or run the guest where a bundle is granted \
                 (gpuhost serve: a bundle/ folder beside function.wasm)"
            ))
            .into());
        };
        let kernel = bundle.kernel(&name)?;
        // A sandboxed guest's scalars reach the operator's kernels too: they run rewritten.
        let sandbox = match (self.ctx.limits.sandbox, self.ctx.bundle_rewrite.is_some()) {
            (true, _) => Some(Arc::new(self.bundle_sandbox(&name)?)),
            (false, false) => None,
            (false, true) => {
                return Err(WitError::NotSupported(format!(
                    "this guest is trusted, and the bundle granted to it was rewritten for \
                     sandboxed guests (kernel `{name}` expects the sandbox's hidden arguments): \
                     grant trusted guests the plain registry (CudaCtx::with_bundle)"
                ))
                .into());
            }
        };
        let res = KernelRes {
            kernel: Arc::new(kernel),
            charge: Charge::granted(),
            sandbox,
        };
        self.ctx.usage.add_kernel(&self.ctx.limits)?;
        self.table.push(res).map_err(|e| {
            self.ctx.usage.remove_kernel();
            e.into()
        })
    }
}
