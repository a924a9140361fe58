//! gpuhost:cuda/memory: device buffers. Every range is checked here, in u64, before it reaches
//! gpuhost, so an overflowing offset is an out-of-bounds error and never a wrapped address.
//! Transfers, fills and copies run on the guest's own stream through gpuhost's staged,
//! fence-awaited transfers: they are async imports that never block the executor thread.

use std::sync::Arc;

use wasmtime::component::Resource;

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::memory::{Host, HostBuffer};
use crate::ctx::CudaCtxView;
use crate::error::CudaResult;
use crate::limits::{Charge, check_range};

/// A guest's device buffer (gpuhost keeps the memory alive while launches use it), with its
/// share of the buffer quota (a bound launch holding it shares it too).
pub struct BufferRes {
    pub(crate) buf: gpuhost::DeviceBuffer,
    pub(crate) charge: Charge,
}

impl CudaCtxView<'_> {
    /// The guest's own stream for buffer transfers (made on first use): transfers await their
    /// fences on it, so the executor thread serves other guests while the device copies.
    fn transfer_stream(&mut self) -> CudaResult<Arc<gpuhost::Stream>> {
        if let Some(s) = &self.ctx.transfer {
            return Ok(s.clone());
        }
        let s = Arc::new(self.ctx.host.stream()?);
        Ok(self.ctx.transfer.insert(s).clone())
    }
}

impl HostBuffer for CudaCtxView<'_> {
    fn create(&mut self, size: u64) -> CudaResult<Resource<BufferRes>> {
        self.ctx.usage.add_buffer(&self.ctx.limits, size)?;
        let pushed = usize::try_from(size)
            .map_err(|_| {
                WitError::OutOfMemory(format!("{size} bytes do not fit this host's address space"))
                    .into()
            })
            .and_then(|bytes| match self.ctx.confinement()? {
                // A sandboxed guest's buffers come from its arena (zeroed there).
                Some(c) => Ok(c.arena.alloc(size)?),
                None => Ok(self.ctx.host.alloc(bytes)?),
            })
            .and_then(|buf| {
                let charge = Charge::buffer(size);
                Ok(self.table.push(BufferRes { buf, charge })?)
            });
        if pushed.is_err() {
            self.ctx.usage.remove_buffer(size);
        }
        pushed
    }

    fn len(&mut self, buffer: Resource<BufferRes>) -> wasmtime::Result<u64> {
        Ok(self.table.get(&buffer)?.buf.len() as u64)
    }

    async fn write(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        data: Vec<u8>,
    ) -> CudaResult<()> {
        let b = self.table.get(&buffer)?.buf.clone();
        let (offset, _) = check_range("write", offset, data.len() as u64, b.len())?;
        let stream = self.transfer_stream()?;
        Ok(stream.upload(&b, offset, &data).await?)
    }

    async fn read(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
    ) -> CudaResult<Vec<u8>> {
        let max = self.ctx.limits.max_transfer_bytes;
        if len > max {
            return Err(WitError::QuotaExceeded(format!(
                "read of {len} bytes is over the guest's transfer limit of {max} bytes; read in smaller pieces"
            ))
            .into());
        }
        let b = self.table.get(&buffer)?.buf.clone();
        let (offset, len) = check_range("read", offset, len, b.len())?;
        let stream = self.transfer_stream()?;
        let mut out = vec![0u8; len];
        stream.download(&b, offset, &mut out).await?;
        Ok(out)
    }

    async fn fill(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
        value: u8,
    ) -> CudaResult<()> {
        let b = self.table.get(&buffer)?.buf.clone();
        let (offset, len) = check_range("fill", offset, len, b.len())?;
        let done = self.transfer_stream()?.fill(&b, offset, len, value)?;
        Ok(done.await?)
    }

    async fn copy_from(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        src: Resource<BufferRes>,
        src_offset: u64,
        len: u64,
    ) -> CudaResult<()> {
        let s = self.table.get(&src)?.buf.clone();
        let (src_offset, len) = check_range("copy source", src_offset, len, s.len())?;
        let d = self.table.get(&buffer)?.buf.clone();
        let (offset, _) = check_range("copy destination", offset, len as u64, d.len())?;
        let done = self
            .transfer_stream()?
            .copy(&d, offset, &s, src_offset, len)?;
        Ok(done.await?)
    }

    fn drop(&mut self, buffer: Resource<BufferRes>) -> wasmtime::Result<()> {
        let b = self.table.delete(buffer)?;
        b.charge.release(&mut self.ctx.usage);
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}
