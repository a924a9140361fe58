//! gpuhost:cuda/bundle: kernels of a bundle the embedder loaded and granted to this guest
//! ([`crate::CudaCtx::with_bundle`]). The registry is shared by every Store it is granted to, so
//! a guest gets a kernel without loading or JIT-compiling anything; the handle counts against
//! the guest's kernel quota only.

use wasmtime::component::Resource;

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::bundle::Host;
use crate::ctx::CudaCtxView;
use crate::error::CudaResult;
use crate::limits::Charge;
use crate::module::KernelRes;

impl Host for CudaCtxView<'_> {
    fn kernel_names(&mut self) -> wasmtime::Result<Vec<String>> {
        let mut names = match &self.ctx.bundle {
            Some(bundle) => bundle.kernel_names(),
            None => Vec::new(),
        };
        names.sort();
        Ok(names)
    }

    fn get_kernel(&mut self, name: String) -> CudaResult<Resource<KernelRes>> {
        let Some(bundle) = &self.ctx.bundle else {
            return Err(WitError::KernelNotFound(format!(
                "no bundle was granted to this guest, so it has no kernel `{name}`: load the \
                 module yourself (module.from-ptx) or run the guest where a bundle is granted \
                 (gpuhost serve: a bundle/ folder beside function.wasm)"
            ))
            .into());
        };
        // The operator's own kernels, loaded by the host: run as loaded, not rewritten (a
        // sandboxed guest still passes them only its own buffers, but its scalars reach them
        // unchecked — see docs/ISOLATION.md, "Not covered").
        let res = KernelRes {
            kernel: std::sync::Arc::new(bundle.kernel(&name)?),
            charge: Charge::granted(),
            sandbox: None,
        };
        self.ctx.usage.add_kernel(&self.ctx.limits)?;
        self.table.push(res).map_err(|e| {
            self.ctx.usage.remove_kernel();
            e.into()
        })
    }
}
