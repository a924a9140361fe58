//! Stream-ordered copies that never block the calling thread on the device: fills and
//! device-to-device copies enqueued and awaited through a fence; host↔device transfers from and
//! into a [`HostBuffer`] with one DMA and no copy; and transfers of ordinary (pageable) memory
//! staged through pooled page-locked chunks (see pinned.rs) — each chunk's DMA enqueued on the
//! stream and awaited through a fence, two chunks in flight so one transfers while the other is
//! copied on the host.
//!
//! Cancel safety: every batch a transfer's fence closes keeps the device buffer and the
//! page-locked region alive until the device is done with them, so dropping a transfer's future
//! midway never frees, or hands to another transfer, memory a DMA still reads or writes; a
//! region whose DMA's end was never observed is leaked (see pinned.rs).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::task::Poll;

use cudarc::driver::sys;

use crate::buffer::DeviceBuffer;
use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::pinned::{HostBuffer, Pinned};
use crate::stream::Stream;

/// Bytes per staging chunk.
pub(crate) const CHUNK: usize = 1 << 20;

/// Which way a DMA goes.
#[derive(Clone, Copy)]
enum Dir {
    /// Device to host.
    Down,
    /// Host to device.
    Up,
}

impl Stream {
    /// Checks that `buf` can be used on this stream now, and binds the context.
    fn enter_with(&self, buf: &DeviceBuffer) -> Result<u64> {
        self.check_buffer("buffer", buf)?;
        self.host().enter_for(self.generation())
    }

    /// Enqueues one DMA between `buf` at `offset` and `mem[at]`, and a fence keeping `buf` and
    /// `mem` alive until it is done. A failed enqueue leaves `mem` unknown: the driver may or
    /// may not have queued the copy.
    fn dma(
        &self,
        dir: Dir,
        buf: &DeviceBuffer,
        offset: usize,
        mem: &Arc<Pinned>,
        at: Range<usize>,
        generation: u64,
    ) -> Result<Completion> {
        debug_assert!(at.end <= mem.cap() && offset + at.len() <= buf.len());
        let (dev, len) = (buf.inner.raw + offset as u64, at.len());
        // SAFETY: `at + len` lies inside the region (callers check ranges against it) and the
        // device range inside `buf`'s allocation (checked by the caller); both stay alive until
        // the fence's batch completes, which holds them. The region is registered in
        // `generation`, the bound context's.
        let (call, r) = unsafe {
            let host = mem.ptr().add(at.start);
            match dir {
                Dir::Down => (
                    "cuMemcpyDtoHAsync_v2",
                    sys::cuMemcpyDtoHAsync_v2(host.cast(), dev, len, self.raw()),
                ),
                Dir::Up => (
                    "cuMemcpyHtoDAsync_v2",
                    sys::cuMemcpyHtoDAsync_v2(dev, host.cast(), len, self.raw()),
                ),
            }
        };
        if let Err(e) = self.host().classify_at(call, r, generation) {
            mem.mark_unknown();
            return Err(e);
        }
        self.fence_keeping(&[buf], Some(mem.clone()))
    }

    /// Checks a transfer between `dev` at `offset` and `host` over `range` and binds the
    /// context; `None` when there is nothing to copy.
    fn enter_direct(
        &self,
        dev: &DeviceBuffer,
        offset: usize,
        host: &HostBuffer,
        range: &Range<usize>,
    ) -> Result<Option<u64>> {
        host.check_range(range)?;
        dev.range(offset, range.len())?;
        if !Arc::ptr_eq(host.mem.host(), self.host()) {
            return Err(Error::DeviceMismatch {
                what: "host buffer",
                expected: self.host().ordinal(),
                found: host.device(),
            });
        }
        let generation = self.enter_with(dev)?;
        if range.is_empty() {
            return Ok(None);
        }
        host.mem.register_for(generation)?;
        Ok(Some(generation))
    }

    /// Copies `src[range]` into `dst` at `offset` with one DMA from the page-locked buffer (no
    /// staging copy), after the work queued on this stream before it; done when the future
    /// resolves. The calling thread never waits for the device.
    ///
    /// Dropping the future midway lets the copy run on: `dst`'s bytes there are then
    /// unspecified, and `src` stays alive for it.
    pub async fn upload_from(
        &self,
        dst: &DeviceBuffer,
        offset: usize,
        src: &HostBuffer,
        range: Range<usize>,
    ) -> Result<()> {
        let Some(generation) = self.enter_direct(dst, offset, src, &range)? else {
            return Ok(());
        };
        self.dma(Dir::Up, dst, offset, &src.mem, range, generation)?
            .await
    }

    /// Copies `range.len()` bytes of `src` from `offset` into `dst[range]` with one DMA into the
    /// page-locked buffer (no staging copy), after the work queued on this stream before it. The
    /// calling thread never waits for the device.
    ///
    /// If the future is dropped midway, or the download fails, `dst` moves to fresh zeroed
    /// memory (its old bytes are gone): the old region stays with a DMA that may still write it.
    pub async fn download_into(
        &self,
        src: &DeviceBuffer,
        offset: usize,
        dst: &mut HostBuffer,
        range: Range<usize>,
    ) -> Result<()> {
        let Some(generation) = self.enter_direct(src, offset, dst, &range)? else {
            return Ok(());
        };
        let done = self.dma(Dir::Down, src, offset, &dst.mem, range, generation);
        // From here the region may be in a DMA's hands until `done` resolves cleanly.
        let guard = Detach(dst);
        let r = match done {
            Ok(done) => done.await,
            Err(e) => Err(e),
        };
        drop(guard);
        r
    }

    /// Copies `out.len()` bytes of `buf` from `offset` into `out`, after the work queued on
    /// this stream before it. The calling thread never waits for the device.
    pub async fn download(&self, buf: &DeviceBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        buf.range(offset, out.len())?;
        let mut in_flight = VecDeque::with_capacity(2);
        for (i, part) in out.chunks_mut(CHUNK).enumerate() {
            let generation = self.enter_with(buf)?;
            let staging = Arc::new(Pinned::take(self.host(), generation, CHUNK)?);
            let at = offset + i * CHUNK;
            let done = self.dma(Dir::Down, buf, at, &staging, 0..part.len(), generation)?;
            in_flight.push_back((done, staging, part));
            if in_flight.len() == 2
                && let Some(next) = in_flight.pop_front()
            {
                land(next).await?;
            }
        }
        while let Some(next) = in_flight.pop_front() {
            land(next).await?;
        }
        Ok(())
    }

    /// Copies `data` into `buf` at `offset`, after the work queued on this stream before it;
    /// done when the future resolves. The calling thread never waits for the device.
    pub async fn upload(&self, buf: &DeviceBuffer, offset: usize, data: &[u8]) -> Result<()> {
        buf.range(offset, data.len())?;
        let mut in_flight = VecDeque::with_capacity(2);
        for (i, part) in data.chunks(CHUNK).enumerate() {
            let generation = self.enter_with(buf)?;
            let mut staging = Pinned::take(self.host(), generation, CHUNK)?;
            staging.bytes_mut(part.len()).copy_from_slice(part);
            let (at, staging) = (offset + i * CHUNK, Arc::new(staging));
            in_flight.push_back(self.dma(Dir::Up, buf, at, &staging, 0..part.len(), generation)?);
            if in_flight.len() == 2
                && let Some(done) = in_flight.pop_front()
            {
                done.await?;
                yield_now().await;
            }
        }
        for done in in_flight {
            done.await?;
        }
        Ok(())
    }

    /// Sets `len` bytes of `buf` from `offset` to `value`, after the work queued before it.
    pub fn fill(
        &self,
        buf: &DeviceBuffer,
        offset: usize,
        len: usize,
        value: u8,
    ) -> Result<Completion> {
        buf.range(offset, len)?;
        let generation = self.enter_with(buf)?;
        if len > 0 {
            // SAFETY: the range lies inside the allocation, kept alive by the fence's batch.
            let r = unsafe {
                sys::cuMemsetD8Async(buf.inner.raw + offset as u64, value, len, self.raw())
            };
            self.host().classify_at("cuMemsetD8Async", r, generation)?;
        }
        self.fence_keeping(&[buf], None)
    }

    /// Copies `len` bytes from `src` at `src_offset` into `dst` at `dst_offset`, after the work
    /// queued before it.
    pub fn copy(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<Completion> {
        dst.range(dst_offset, len)?;
        src.range(src_offset, len)?;
        self.enter_with(src)?;
        let generation = self.enter_with(dst)?;
        if len > 0 {
            // SAFETY: both ranges lie inside live allocations of this context, both kept alive
            // by the fence's batch until the copy is done.
            let r = unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    dst.inner.raw + dst_offset as u64,
                    src.inner.raw + src_offset as u64,
                    len,
                    self.raw(),
                )
            };
            self.host()
                .classify_at("cuMemcpyDtoDAsync_v2", r, generation)?;
        }
        self.fence_keeping(&[dst, src], None)
    }
}

/// Moves a download's host buffer off its region when dropped while the region is still in a
/// DMA's hands (see [`HostBuffer::detach_if_in_use`]).
struct Detach<'a>(&'a mut HostBuffer);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.detach_if_in_use();
    }
}

/// Awaits one downloaded chunk and copies it out of its staging chunk.
async fn land((done, staging, part): (Completion, Arc<Pinned>, &mut [u8])) -> Result<()> {
    done.await?;
    part.copy_from_slice(staging.bytes(part.len()));
    yield_now().await;
    Ok(())
}

/// Lets the executor run other tasks between chunks. Copying a large transfer through staging
/// is milliseconds of CPU work, and when the device finishes each chunk before it is awaited,
/// every await is ready at once: without this, the transfer would hold its thread throughout.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
