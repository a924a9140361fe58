//! gpuhost:cuda/memory: device buffers. Every range is checked here, in u64, before it reaches
//! gpuhost, so an overflowing offset is an out-of-bounds error and never a wrapped address.

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

impl HostBuffer for CudaCtxView<'_> {
    fn create(&mut self, size: u64) -> CudaResult<Resource<BufferRes>> {
        self.ctx.usage.add_buffer(&self.ctx.limits, size)?;
        let pushed = usize::try_from(size)
            .map_err(|_| {
                WitError::OutOfMemory(format!("{size} bytes do not fit this host's address space"))
                    .into()
            })
            .and_then(|bytes| Ok(self.ctx.host.alloc(bytes)?))
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

    fn write(&mut self, buffer: Resource<BufferRes>, offset: u64, data: Vec<u8>) -> CudaResult<()> {
        let b = &self.table.get(&buffer)?.buf;
        let (offset, _) = check_range("write", offset, data.len() as u64, b.len())?;
        Ok(b.write(offset, &data)?)
    }

    fn read(&mut self, buffer: Resource<BufferRes>, offset: u64, len: u64) -> CudaResult<Vec<u8>> {
        let max = self.ctx.limits.max_transfer_bytes;
        if len > max {
            return Err(WitError::QuotaExceeded(format!(
                "read of {len} bytes is over the guest's transfer limit of {max} bytes; read in smaller pieces"
            ))
            .into());
        }
        let b = &self.table.get(&buffer)?.buf;
        let (offset, len) = check_range("read", offset, len, b.len())?;
        let mut out = vec![0u8; len];
        b.read(offset, &mut out)?;
        Ok(out)
    }

    fn fill(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
        value: u8,
    ) -> CudaResult<()> {
        let b = &self.table.get(&buffer)?.buf;
        let (offset, len) = check_range("fill", offset, len, b.len())?;
        Ok(b.fill(offset, len, value)?)
    }

    fn copy_from(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        src: Resource<BufferRes>,
        src_offset: u64,
        len: u64,
    ) -> CudaResult<()> {
        let s = &self.table.get(&src)?.buf;
        let (src_offset, len) = check_range("copy source", src_offset, len, s.len())?;
        let d = &self.table.get(&buffer)?.buf;
        let (offset, _) = check_range("copy destination", offset, len as u64, d.len())?;
        Ok(d.copy_from(offset, s, src_offset, len)?)
    }

    fn drop(&mut self, buffer: Resource<BufferRes>) -> wasmtime::Result<()> {
        let b = self.table.delete(buffer)?;
        b.charge.release(&mut self.ctx.usage);
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}
