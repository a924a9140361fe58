//! gpuhost:cuda/module: device code loaded from PTX or cubin bytes, and kernels looked up in it.
//! A module is a one-module gpuhost `Registry`; a kernel handle keeps it loaded, and counted in
//! the guest's module quota, after the module handle is dropped.

use std::sync::Arc;

use gpuhost::{ModuleImage, ModuleSource, Registry};
use wasmtime::component::Resource;

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::module::{Host, HostKernel, HostModule, ParamInfo};
use crate::ctx::CudaCtxView;
use crate::error::{CudaResult, from_gpu};
use crate::limits::Charge;

/// A guest's loaded module: the registry holding it and its share of the module quota.
pub struct ModuleRes {
    pub(crate) registry: Arc<Registry>,
    charge: Charge,
}

/// A guest's kernel handle, with its share of its module's quota.
pub struct KernelRes {
    pub(crate) kernel: gpuhost::Kernel,
    pub(crate) charge: Charge,
}

impl CudaCtxView<'_> {
    fn load(
        &mut self,
        image: ModuleImage,
        bytes: u64,
        is_ptx: bool,
    ) -> CudaResult<Resource<ModuleRes>> {
        self.ctx.usage.add_module(&self.ctx.limits, bytes)?;
        let source = ModuleSource::new("guest", image);
        match Registry::from_sources(&self.ctx.host, "guest", vec![source]) {
            Ok(registry) => Ok(self
                .table
                .push(ModuleRes {
                    registry,
                    charge: Charge::module(bytes, 0),
                })
                .inspect_err(|_| {
                    self.ctx.usage.remove_module(bytes);
                })?),
            Err(e) => {
                self.ctx.usage.remove_module(bytes);
                Err(match (&e, is_ptx) {
                    (gpuhost::Error::InvalidModule { log, .. }, true) => {
                        WitError::InvalidPtx(log.clone())
                    }
                    _ => from_gpu(&e),
                }
                .into())
            }
        }
    }
}

impl HostModule for CudaCtxView<'_> {
    fn from_ptx(&mut self, ptx: String) -> CudaResult<Resource<ModuleRes>> {
        let bytes = ptx.len() as u64;
        self.load(ModuleImage::Ptx(ptx), bytes, true)
    }

    fn from_cubin(&mut self, image: Vec<u8>) -> CudaResult<Resource<ModuleRes>> {
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
        let m = self.table.get(&module)?;
        let res = KernelRes {
            kernel: m.registry.kernel(&name)?,
            charge: m.charge.clone(),
        };
        self.ctx.usage.add_kernel(&self.ctx.limits)?;
        self.table.push(res).map_err(|e| {
            self.ctx.usage.remove_kernel();
            e.into()
        })
    }

    fn drop(&mut self, module: Resource<ModuleRes>) -> wasmtime::Result<()> {
        let m = self.table.delete(module)?;
        m.charge.release(&mut self.ctx.usage);
        Ok(())
    }
}

impl HostKernel for CudaCtxView<'_> {
    fn name(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<String> {
        Ok(self.table.get(&kernel)?.kernel.name().to_string())
    }

    fn params(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<Vec<ParamInfo>> {
        let k = &self.table.get(&kernel)?.kernel;
        Ok(k.params()
            .iter()
            .map(|p| ParamInfo {
                offset: p.offset,
                size: p.size,
            })
            .collect())
    }

    fn drop(&mut self, kernel: Resource<KernelRes>) -> wasmtime::Result<()> {
        let k = self.table.delete(kernel)?;
        k.charge.release(&mut self.ctx.usage);
        self.ctx.usage.remove_kernel();
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}
