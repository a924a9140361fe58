//! gpuhost:cuda/device: what the guest may know about its device and its quotas.

use crate::bindings::gpuhost::cuda::device::{DeviceInfo, Host, MemoryInfo, QuotaInfo};
use crate::bindings::gpuhost::cuda::types::{self, Dim3};
use crate::calls::HostCall;
use crate::ctx::CudaCtxView;
use crate::error::{CudaError, CudaResult};

fn dim3(d: [u32; 3]) -> Dim3 {
    Dim3 {
        x: d[0],
        y: d[1],
        z: d[2],
    }
}

impl Host for CudaCtxView<'_> {
    fn info(&mut self) -> wasmtime::Result<DeviceInfo> {
        let _timer = self.ctx.time(HostCall::DeviceInfo);
        let f = self.ctx.host.facts();
        Ok(DeviceInfo {
            name: f.name.clone(),
            compute_capability_major: f.compute_capability.0,
            compute_capability_minor: f.compute_capability.1,
            sm_count: f.sm_count,
            max_threads_per_block: f.max_threads_per_block,
            max_block_dim: dim3(f.max_block_dim),
            max_grid_dim: dim3(f.max_grid_dim),
            max_shared_mem_per_block: f.max_shared_mem_per_block,
            total_memory: f.total_memory,
            driver_version: u32::try_from(f.driver_version).unwrap_or(0),
        })
    }

    fn memory(&mut self) -> CudaResult<MemoryInfo> {
        let _timer = self.ctx.time(HostCall::DeviceMemory);
        let m = self.ctx.host.mem_info()?;
        Ok(MemoryInfo {
            free: m.free,
            total: m.total,
        })
    }

    fn quotas(&mut self) -> wasmtime::Result<QuotaInfo> {
        let _timer = self.ctx.time(HostCall::DeviceQuotas);
        self.ctx.retire_orphans();
        let (l, u) = (&self.ctx.limits, &self.ctx.usage);
        Ok(QuotaInfo {
            max_module_bytes: l.max_module_bytes,
            max_modules: l.max_modules,
            max_buffers: l.max_buffers,
            max_buffer_bytes: l.max_buffer_bytes,
            max_launches_in_flight: l.max_launches_in_flight,
            max_ptx_bytes: l.max_ptx_bytes,
            max_transfer_bytes: l.max_transfer_bytes,
            max_launch_args: l.max_launch_args,
            max_streams_and_events: l.max_streams_and_events,
            max_kernels: l.max_kernels,
            max_globals_bytes: l.max_globals_bytes,
            max_launch_local_bytes: l.max_launch_local_bytes,
            max_kernel_ms: u64::try_from(l.max_kernel_time.as_millis()).unwrap_or(u64::MAX),
            sandboxed: l.sandbox,
            used_module_bytes: u.module_bytes,
            used_modules: u.modules,
            used_buffers: u.buffers,
            used_buffer_bytes: u.buffer_bytes,
            launches_in_flight: u.launches_in_flight,
            used_streams_and_events: u.streams_and_events,
            used_kernels: u.kernels,
            used_globals_bytes: u.globals_bytes,
        })
    }
}

impl types::Host for CudaCtxView<'_> {
    fn convert_error(&mut self, err: CudaError) -> wasmtime::Result<types::Error> {
        match err {
            CudaError::Guest(e) => {
                if let types::Error::QuotaExceeded(m) = &e {
                    self.ctx.quota_refusals += 1;
                    self.ctx.last_refusal = Some(m.clone());
                }
                Ok(e)
            }
            CudaError::Trap(t) => Err(t),
        }
    }
}
