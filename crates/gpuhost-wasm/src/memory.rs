//! gpuhost:cuda/memory: device buffers. Every range is checked here, in u64, before it reaches
//! gpuhost, so an overflowing offset is an out-of-bounds error and never a wrapped address.
//! Transfers, fills and copies run on the guest's own stream through gpuhost's staged,
//! fence-awaited transfers: they are async imports that never block the executor thread.
//!
//! Copies per transfer (each one a pass over the bytes):
//! - `write` stages straight from the guest's linear memory: [`add_zero_copy_write`] replaces
//!   the generated import with one that takes the list as a `WasmList` (its place in guest
//!   memory) instead of lifting it into a fresh `Vec`. Cancel-safe by construction: the staging
//!   copy threads read the guest's bytes only inside a synchronous copy step within one poll
//!   of the future that owns the Store's borrow (gpuhost's copy.rs), and the DMAs read only
//!   page-locked staging — once the future is dropped, nothing reads guest memory. A write of
//!   1 MiB or more into a memory gpuhost can lock (guest_memory/) is instead one DMA straight
//!   from guest memory once that memory is locked: a dropped future's DMA then reads on, and
//!   its piece keeps the memory mapped, and out of reuse, until it ends.
//! - `read` downloads into the result `Vec`'s uninitialised storage (no zero fill), which
//!   wasmtime then lowers into guest memory (the guest's `realloc` and a memcpy). That last
//!   copy stays: wasmtime's public API gives a host function no way to write guest memory but
//!   lowering its results (its `LowerContext` is `#[doc(hidden)]`).

use crate::calls::HostCall;
use std::future::Future;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{
    ComponentNamedList, Lift, Linker, Lower, Resource, StreamReader, WasmList,
};

use crate::bindings::WitError;
use crate::bindings::gpuhost::cuda::memory::{Host, HostBuffer};
use crate::bindings::gpuhost::cuda::types::{self, Host as _};
use crate::ctx::{CudaCtxView, CudaView};
use crate::error::{CudaError, CudaResult};
use crate::limits::{Charge, check_range};
use crate::stream_read::ReadingRes;

/// The WIT instance whose imports [`replace_import`] replaces, and the one [`add_zero_copy_write`]
/// replaces.
const MEMORY: &str = "gpuhost:cuda/memory@0.1.0";
const WRITE: &str = "[method]buffer.write";

/// A guest's device buffer (gpuhost keeps the memory alive while launches use it), with its
/// share of the buffer quota (a bound launch holding it shares it too).
pub struct BufferRes {
    pub(crate) buf: gpuhost::DeviceBuffer,
    pub(crate) charge: Charge,
    /// `Some(n)`: every byte is zero for as long as the guest's launch count stays `n` — the
    /// buffer came zeroed from the sandbox's arena while none of the guest's kernels could be
    /// running, and nothing has written it since. A sandboxed kernel may write anywhere in its
    /// guest's arena, so any launch ends this. `fill` with 0 then has nothing to do (the guest
    /// SDK's `DeviceBuffer::zeroed` is create + fill: one device round trip saved).
    pub(crate) still_zero: Option<u64>,
}

impl CudaCtxView<'_> {
    /// The guest's own stream for buffer transfers (made on first use): transfers await their
    /// fences on it, so the executor thread serves other guests while the device copies.
    pub(crate) fn transfer_stream(&mut self) -> CudaResult<Arc<gpuhost::Stream>> {
        if let Some(s) = &self.ctx.transfer {
            return Ok(s.clone());
        }
        let s = Arc::new(self.ctx.host.stream()?);
        Ok(self.ctx.transfer.insert(s).clone())
    }

    /// Checks a write of `len` bytes at `offset` into `buffer`: the device buffer, the offset
    /// as usize and the stream to upload on.
    fn start_write(
        &mut self,
        buffer: &Resource<BufferRes>,
        offset: u64,
        len: usize,
    ) -> CudaResult<(gpuhost::DeviceBuffer, usize, Arc<gpuhost::Stream>)> {
        let res = self.table.get_mut(buffer)?;
        let (offset, _) = check_range("write", offset, len as u64, res.buf.len())?;
        res.still_zero = None;
        let b = res.buf.clone();
        Ok((b, offset, self.transfer_stream()?))
    }
}

impl CudaCtxView<'_> {
    /// Checks a read of `len` bytes at `offset` of `buffer` (`buffer.read`, `stream.read-after`)
    /// against the guest's transfer limit and the buffer: the device buffer, offset and length.
    pub(crate) fn start_read(
        &mut self,
        buffer: &Resource<BufferRes>,
        offset: u64,
        len: u64,
    ) -> CudaResult<(gpuhost::DeviceBuffer, usize, usize)> {
        let max = self.ctx.limits.max_transfer_bytes;
        if len > max {
            return Err(WitError::QuotaExceeded(format!(
                "read of {len} bytes is over the guest's transfer limit of {max} bytes; read in smaller pieces"
            ))
            .into());
        }
        let b = self.table.get(buffer)?.buf.clone();
        let (offset, len) = check_range("read", offset, len, b.len())?;
        Ok((b, offset, len))
    }
}

/// Defines `name` of gpuhost:cuda/memory in `linker` as `f`, in place of the generated bindings'
/// definition (made just before), for an import that needs what they do not give it: the
/// Store. Leaves the linker's name shadowing off.
pub(crate) fn replace_import<T, P, R, F>(
    linker: &mut Linker<T>,
    name: &str,
    f: F,
) -> wasmtime::Result<()>
where
    T: 'static,
    F: Fn(StoreContextMut<'_, T>, P) -> Box<dyn Future<Output = wasmtime::Result<R>> + Send + '_>
        + Send
        + Sync
        + 'static,
    P: ComponentNamedList + Lift + 'static,
    R: ComponentNamedList + Lower + 'static,
{
    linker.allow_shadowing(true);
    let defined = linker
        .instance(MEMORY)
        .and_then(|mut memory| memory.func_wrap_async(name, f));
    linker.allow_shadowing(false);
    defined
}

/// Replaces `buffer.write` in `linker` with one that uploads from the guest's memory in place
/// (see the module header).
pub(crate) fn add_zero_copy_write<T: CudaView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    replace_import(
        linker,
        WRITE,
        |store: StoreContextMut<'_, T>,
         (buffer, offset, data): (Resource<BufferRes>, u64, WasmList<u8>)| {
            Box::new(write_in_place(store, buffer, offset, data))
        },
    )
}

/// `buffer.write` of `data`, read from the guest's memory where it lies.
async fn write_in_place<T: CudaView + 'static>(
    mut store: StoreContextMut<'_, T>,
    buffer: Resource<BufferRes>,
    offset: u64,
    data: WasmList<u8>,
) -> wasmtime::Result<(Result<(), types::Error>,)> {
    let _timer = store.data_mut().cuda().ctx.time(HostCall::BufferWrite);
    let started = store
        .data_mut()
        .cuda()
        .start_write(&buffer, offset, data.len());
    let r = match started {
        Ok((b, offset, stream)) => {
            // The guest's tally of locked memory, a handle of it: the write's bytes borrow the
            // Store that holds it.
            let ctx = store.data_mut().cuda().ctx;
            let max_locked = ctx.limits.max_locked_memory_bytes;
            let locked = ctx.locked.clone();
            let direct = crate::guest_memory::direct_parts_for(
                stream.host(),
                data.as_le_slice(&store),
                &locked,
                max_locked,
            );
            // The guest is suspended and this future holds the Store's only borrow, so these
            // bytes stay put (no guest code runs, no memory.grow moves them) until it is done
            // or dropped.
            let bytes = data.as_le_slice(&store);
            upload_guest_bytes(&stream, &b, offset, bytes, direct)
                .await
                .map_err(CudaError::from)
        }
        Err(e) => Err(e),
    };
    // As the generated bindings do for every import: a guest error is returned, a host bug traps.
    let r = match r {
        Ok(()) => Ok(()),
        Err(e) => Err(store.data_mut().cuda().convert_error(e)?),
    };
    Ok((r,))
}

/// Uploads a guest's `bytes` into `b` at `offset`: straight from its memory through `direct`
/// (the locked pieces [`direct_parts`](crate::guest_memory::direct_parts) gave) where that
/// memory can be locked, else staged.
async fn upload_guest_bytes(
    stream: &gpuhost::Stream,
    b: &gpuhost::DeviceBuffer,
    offset: usize,
    bytes: &[u8],
    direct: Option<Vec<(gpuhost::LockedMemory, std::ops::Range<usize>)>>,
) -> gpuhost::Result<()> {
    let Some(parts) = direct else {
        return stream.upload(b, offset, bytes).await;
    };
    match stream.upload_locked(b, offset, &parts).await {
        Ok(()) => Ok(()),
        // The driver refusing a piece (registered again after a context loss, a reused memory's
        // pages past its guest's size being inaccessible) is no fault of the guest's: staged
        // instead, in stream order after whatever part went direct, as every later write from
        // that memory. A fault that is the device's fails the staged copy too, and that error
        // is the guest's.
        Err(e) => {
            tracing::debug!(error = %e, "a write straight from guest memory failed: staged");
            crate::guest_memory::direct_failed(bytes);
            stream.upload(b, offset, bytes).await
        }
    }
}

impl HostBuffer for CudaCtxView<'_> {
    fn create(&mut self, size: u64) -> CudaResult<Resource<BufferRes>> {
        let _timer = self.ctx.time(HostCall::BufferCreate);
        self.ctx.usage.add_buffer(&self.ctx.limits, size)?;
        // An arena's allocations are zeroed before they are handed out; with a kernel of this
        // guest possibly still running (it may write anywhere in the arena) that proves nothing.
        let launches = self.ctx.launches;
        let idle = self.ctx.usage.launches_in_flight == 0;
        let pushed = usize::try_from(size)
            .map_err(|_| {
                WitError::OutOfMemory(format!("{size} bytes do not fit this host's address space"))
                    .into()
            })
            .and_then(|bytes| match self.ctx.confinement()? {
                // A sandboxed guest's buffers come from its arena (zeroed there).
                Some(c) => Ok((c.arena.alloc(size)?, idle.then_some(launches))),
                None => Ok((self.ctx.host.alloc(bytes)?, None)),
            })
            .and_then(|(buf, still_zero)| {
                let charge = Charge::buffer(size);
                Ok(self.table.push(BufferRes {
                    buf,
                    charge,
                    still_zero,
                })?)
            });
        if pushed.is_err() {
            self.ctx.usage.remove_buffer(size);
        }
        pushed
    }

    fn len(&mut self, buffer: Resource<BufferRes>) -> wasmtime::Result<u64> {
        let _timer = self.ctx.time(HostCall::BufferLen);
        Ok(self.table.get(&buffer)?.buf.len() as u64)
    }

    /// The generated import, lifting the list into a `Vec` first;
    /// [`add_to_linker`](crate::add_to_linker) replaces it with [`add_zero_copy_write`]'s.
    async fn write(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        data: Vec<u8>,
    ) -> CudaResult<()> {
        let (b, offset, stream) = self.start_write(&buffer, offset, data.len())?;
        Ok(stream.upload(&b, offset, &data).await?)
    }

    async fn read(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
    ) -> CudaResult<Vec<u8>> {
        let _timer = self.ctx.time(HostCall::BufferRead);
        let (b, offset, len) = self.start_read(&buffer, offset, len)?;
        let stream = self.transfer_stream()?;
        Ok(stream.download_to_vec(&b, offset, len).await?)
    }

    /// Defined by [`add_read_stream`](crate::stream_read::add_read_stream) instead.
    fn read_stream(
        &mut self,
        _buffer: Resource<BufferRes>,
        _offset: u64,
        _len: u64,
    ) -> CudaResult<(Resource<ReadingRes>, StreamReader<u8>)> {
        crate::stream_read::generated_read_stream()
    }

    async fn fill(
        &mut self,
        buffer: Resource<BufferRes>,
        offset: u64,
        len: u64,
        value: u8,
    ) -> CudaResult<()> {
        let _timer = self.ctx.time(HostCall::BufferFill);
        let launches = self.ctx.launches;
        let res = self.table.get_mut(&buffer)?;
        let (offset, len) = check_range("fill", offset, len, res.buf.len())?;
        if value == 0 && res.still_zero == Some(launches) {
            return Ok(());
        }
        res.still_zero = None;
        let b = res.buf.clone();
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
        let _timer = self.ctx.time(HostCall::BufferCopyFrom);
        let s = self.table.get(&src)?.buf.clone();
        let (src_offset, len) = check_range("copy source", src_offset, len, s.len())?;
        let dst = self.table.get_mut(&buffer)?;
        let (offset, _) = check_range("copy destination", offset, len as u64, dst.buf.len())?;
        dst.still_zero = None;
        let d = dst.buf.clone();
        let done = self
            .transfer_stream()?
            .copy(&d, offset, &s, src_offset, len)?;
        Ok(done.await?)
    }

    fn drop(&mut self, buffer: Resource<BufferRes>) -> wasmtime::Result<()> {
        let _timer = self.ctx.time(HostCall::BufferDrop);
        let b = self.table.delete(buffer)?;
        b.charge.release(&mut self.ctx.usage);
        Ok(())
    }
}

impl Host for CudaCtxView<'_> {}

#[cfg(test)]
mod tests {
    use wasmtime::component::ResourceTable;

    use super::*;
    use crate::{CudaCtx, Limits};

    /// A guest context on device 0 (small quotas: a sandbox arena of a granule or so), its
    /// table, and a fresh 4 KiB buffer's handle in it.
    fn with_buffer(sandbox: bool) -> (CudaCtx, ResourceTable, u32) {
        let limits = Limits {
            max_buffer_bytes: 1 << 20,
            max_globals_bytes: 1 << 16,
            sandbox,
            ..Limits::default()
        };
        let mut ctx = CudaCtx::new(gpuhost::host(0).unwrap(), limits);
        let mut table = ResourceTable::new();
        let mut view = CudaCtxView {
            ctx: &mut ctx,
            table: &mut table,
        };
        let rep = HostBuffer::create(&mut view, 4096).unwrap().rep();
        (ctx, table, rep)
    }

    /// Fills buffer `rep` with zeros; true when that reached the device (the guest's transfer
    /// stream, made at its first transfer, exists).
    async fn zero_fill(ctx: &mut CudaCtx, table: &mut ResourceTable, rep: u32) -> bool {
        let mut view = CudaCtxView { ctx, table };
        HostBuffer::fill(&mut view, Resource::new_borrow(rep), 0, 4096, 0)
            .await
            .unwrap();
        view.ctx.transfer.is_some()
    }

    #[tokio::test]
    async fn a_zero_fill_of_a_fresh_sandboxed_buffer_does_no_device_work_until_a_launch() {
        let (mut ctx, mut table, rep) = with_buffer(true);
        assert!(
            !zero_fill(&mut ctx, &mut table, rep).await,
            "a fill of a buffer still zero from the arena reached the device"
        );
        // What every launch does to the count: any kernel may have written the arena since.
        ctx.launches += 1;
        assert!(
            zero_fill(&mut ctx, &mut table, rep).await,
            "a fill after a launch was skipped"
        );
    }

    #[tokio::test]
    async fn a_trusted_guests_buffer_is_filled_on_the_device_even_when_fresh() {
        let (mut ctx, mut table, rep) = with_buffer(false);
        assert!(
            zero_fill(&mut ctx, &mut table, rep).await,
            "a fill of device memory no one zeroed was skipped"
        );
    }
}
