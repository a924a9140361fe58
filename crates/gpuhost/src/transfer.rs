//! Stream-ordered copies that never block the calling thread on the device: fills and
//! device-to-device copies enqueued and awaited through a fence, and host↔device transfers
//! staged through pooled page-locked chunks (our own memory, registered with the context) — each chunk's DMA enqueued on the stream and awaited
//! through a fence, two chunks in flight so one transfers while the other is copied on the host.
//!
//! Cancel safety: every batch a transfer's fence closes keeps the device buffer and the staging
//! chunk alive until the device is done with them, so dropping a transfer's future midway never
//! frees, or hands to another transfer, memory a DMA still writes. A chunk whose fence failed
//! (the context was lost, or the event could not be recorded) may still be read or written by a
//! copy the driver runs late, so it is leaked rather than reused or freed — as is a chunk in use
//! when its context died (see [`Returned::Dead`]).

use std::alloc::Layout;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use cudarc::driver::sys;

use crate::buffer::DeviceBuffer;
use crate::completion::Completion;
use crate::error::Result;
use crate::host::Host;
use crate::stream::Stream;

/// Bytes per staging chunk.
pub(crate) const CHUNK: usize = 1 << 20;
/// Chunks a host keeps pooled; more in use at once are freed when returned.
pub(crate) const POOLED_CHUNKS: usize = 8;

/// Page-aligned, as cuMemHostRegister wants.
fn chunk_layout() -> Layout {
    // CHUNK is a nonzero multiple of the page size, so this layout is valid.
    Layout::from_size_align(CHUNK, 4096).unwrap_or_else(|_| Layout::new::<[u8; CHUNK]>())
}

/// A staging chunk: [`CHUNK`] bytes of our own heap memory, page-locked for one context with
/// cuMemHostRegister (taken from the host's pool, returned to it on drop). The memory is ours,
/// not the context's: a foreign reset that destroys the context only drops the registration,
/// so copying in or out of a chunk can never touch memory the driver freed.
pub(crate) struct Staging {
    host: Arc<Host>,
    ptr: *mut u8,
    generation: u64,
    /// Set when a copy enqueued on the chunk may not have run (its fence failed): then no one
    /// can tell when the driver is done with it, and it is leaked on drop, never reused or freed.
    unknown: AtomicBool,
}

// SAFETY: the chunk is plain heap memory owned by this value alone (taken from the pool or
// allocated for it) and only read or written by the one transfer that holds it, after the fence
// covering its DMA resolved.
unsafe impl Send for Staging {}
// SAFETY: shared only as an Arc between the transfer and the batch keeping it alive; the batch
// never touches the memory.
unsafe impl Sync for Staging {}

impl Staging {
    pub(crate) fn take(host: &Arc<Host>, generation: u64) -> Result<Self> {
        if let Some(ptr) = host.take_staging(generation) {
            return Ok(Self {
                host: host.clone(),
                ptr: ptr as *mut u8,
                generation,
                unknown: AtomicBool::new(false),
            });
        }
        let layout = chunk_layout();
        // SAFETY: a nonzero-size layout.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: the caller entered the host at `generation`; `ptr` is CHUNK bytes of our own
        // memory, which outlives the registration (unregistered or dead with its context first).
        let r = unsafe { sys::cuMemHostRegister_v2(ptr.cast(), CHUNK, 0) };
        if let Err(e) = host.classify("cuMemHostRegister_v2", r) {
            // SAFETY: allocated above with this layout, never registered, freed once.
            unsafe { std::alloc::dealloc(ptr, layout) };
            return Err(e);
        }
        Ok(Self {
            host: host.clone(),
            ptr,
            generation,
            unknown: AtomicBool::new(false),
        })
    }

    /// Marks the chunk as possibly still in use by the driver: it will be leaked on drop.
    pub(crate) fn mark_unknown(&self) {
        self.unknown.store(true, Ordering::Relaxed);
    }

    /// The first `len` bytes, to read after the fence covering the DMA into them resolved.
    fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: `ptr` is CHUNK bytes of live heap memory owned by this value; len is clamped
        // to CHUNK; no DMA is in flight once its fence resolved, and nothing else writes it.
        unsafe { std::slice::from_raw_parts(self.ptr, len.min(CHUNK)) }
    }

    /// The first `len` bytes, to fill before enqueuing a DMA from them.
    fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: as `bytes`; `&mut self` is the only handle (not yet shared with a batch).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(CHUNK)) }
    }
}

/// What became of a staging chunk handed back to its host's pool.
pub(crate) enum Returned {
    /// Pooled for the next transfer.
    Pooled,
    /// The pool is full: the chunk is to be unregistered and freed.
    Spare,
    /// Its context died. The chunk may have been in use then, and whether a driver still writes
    /// it (softcuda's workers drain a dead context's queue) cannot be known: it is leaked, never
    /// freed — as gpuhost forgets a dead generation's handles rather than destroy them.
    Dead,
}

impl Drop for Staging {
    fn drop(&mut self) {
        if *self.unknown.get_mut() {
            // A copy enqueued on it may still run: leaked (see `unknown`).
            return;
        }
        match self.host.give_staging(self.generation, self.ptr as usize) {
            Returned::Pooled | Returned::Dead => {}
            Returned::Spare => {
                // SAFETY: the chunk is ours and of the current context; its last holder is
                // dropping it, after its fence's batch completed (the DMA is done).
                unsafe { free_chunk(&self.host, self.generation, self.ptr) };
            }
        }
    }
}

/// Unregisters a chunk (if its context is still the current one: a dead context took the
/// registration with it) and frees its memory.
///
/// # Safety
/// `ptr` is a chunk made by [`Staging::take`] that no DMA uses and nothing else holds.
unsafe fn free_chunk(host: &Host, generation: u64, ptr: *mut u8) {
    if host.enter_for(generation).is_ok() {
        // SAFETY: registered by Staging::take in this (current) context.
        let r = unsafe { sys::cuMemHostUnregister(ptr.cast()) };
        if let Err(e) = host.classify("cuMemHostUnregister", r) {
            host.drop_error("unregistering a staging chunk", &e);
        }
    }
    // SAFETY: as this function's contract.
    unsafe { free_dead_chunk(ptr) };
}

/// Frees a chunk whose context is gone (its registration went with it). Touches no driver
/// state, so the host may call it while it recovers. Only for chunks that were idle in the pool
/// when their context died (a chunk in use then is leaked instead: see [`Returned::Dead`]).
///
/// # Safety
/// `ptr` is a chunk made by [`Staging::take`], registered in a context that no longer exists (or
/// never registered), that no DMA uses and nothing else holds.
pub(crate) unsafe fn free_dead_chunk(ptr: *mut u8) {
    // SAFETY: allocated by Staging::take with this layout; freed once, per the contract.
    unsafe { std::alloc::dealloc(ptr, chunk_layout()) };
}

impl Stream {
    /// Checks that `buf` can be used on this stream now, and binds the context.
    fn enter_with(&self, buf: &DeviceBuffer) -> Result<u64> {
        self.check_buffer("buffer", buf)?;
        self.host().enter_for(self.generation())
    }

    /// Copies `out.len()` bytes of `buf` from `offset` into `out`, after the work queued on
    /// this stream before it. The calling thread never waits for the device.
    pub async fn download(&self, buf: &DeviceBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        buf.range(offset, out.len())?;
        let mut in_flight = VecDeque::with_capacity(2);
        for (i, part) in out.chunks_mut(CHUNK).enumerate() {
            let generation = self.enter_with(buf)?;
            let staging = Staging::take(self.host(), generation)?;
            let src = buf.inner.raw + (offset + i * CHUNK) as u64;
            // SAFETY: the range lies inside the allocation (checked above); the staging chunk
            // holds CHUNK >= part.len() bytes and stays alive until the fence's batch completes.
            let r = unsafe {
                sys::cuMemcpyDtoHAsync_v2(staging.ptr.cast(), src, part.len(), self.raw())
            };
            self.host()
                .classify_at("cuMemcpyDtoHAsync_v2", r, generation)?;
            let staging = Arc::new(staging);
            let done = self.fence_keeping(&[buf], Some(staging.clone()))?;
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
            let mut staging = Staging::take(self.host(), generation)?;
            staging.bytes_mut(part.len()).copy_from_slice(part);
            let dst = buf.inner.raw + (offset + i * CHUNK) as u64;
            // SAFETY: the range lies inside the allocation; the chunk holds the part and stays
            // alive (unwritten) until the fence's batch completes.
            let r = unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst, staging.ptr.cast(), part.len(), self.raw())
            };
            self.host()
                .classify_at("cuMemcpyHtoDAsync_v2", r, generation)?;
            in_flight.push_back(self.fence_keeping(&[buf], Some(Arc::new(staging)))?);
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

/// Awaits one downloaded chunk and copies it out of its staging chunk.
async fn land((done, staging, part): (Completion, Arc<Staging>, &mut [u8])) -> Result<()> {
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
