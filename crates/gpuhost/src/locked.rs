//! Host memory that someone else owns — a WebAssembly guest's linear memory, say — page-locked
//! for one host's transfers ([`Host::lock_memory`]), so an upload from it is one DMA with no
//! staging copy ([`Stream::upload_locked`]), as from a [`HostBuffer`](crate::HostBuffer).
//!
//! It is a [`Pinned`] region with an owner: the value that keeps the memory mapped. The region
//! is never pooled. Its last holder — the caller's handle, or the batch fencing a DMA that
//! still reads it — drops it, which unregisters it on the host's release thread (cuMemHostUnregister
//! waits for every running kernel) and only then drops the owner, so the memory is unmapped
//! after no DMA can touch it. A region whose DMA's end was never observed leaks its owner.

use std::any::Any;
use std::borrow::Borrow;
use std::ops::Range;
use std::sync::Arc;

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::pinned::{Pinned, check_host_range};
use crate::stream::Stream;
use crate::transfer::Dir;

/// Page size cuMemHostRegister works in.
const PAGE: usize = 4096;

/// Someone else's host memory, page-locked with one host's context
/// ([`Host::lock_memory`]). Cloning shares the registration.
#[derive(Clone)]
pub struct LockedMemory {
    region: Arc<Pinned>,
}

impl std::fmt::Debug for LockedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockedMemory")
            .field("device", &self.region.host().ordinal())
            .field("addr", &self.addr())
            .field("len", &self.len())
            .finish()
    }
}

impl Host {
    /// Page-locks the `len` bytes at `ptr`, memory the caller owns, with this host's context,
    /// for [`Stream::upload_locked`]. `owner` is what keeps the memory mapped: gpuhost drops it
    /// once the returned handle and every transfer using the memory are gone and the memory is
    /// unregistered — on the host's release thread, since unregistering waits for every kernel
    /// running on the device. Registering does not wait for kernels; it takes milliseconds for
    /// large ranges (pages are pinned one by one).
    ///
    /// Errors: [`Error::HostMemory`] when `ptr` or `len` is not page-aligned, `len` is zero, or
    /// the driver refuses (too much page-locked memory, or a range already registered).
    ///
    /// # Safety
    /// - `[ptr, ptr + len)` is mapped, readable and writable memory;
    /// - it stays mapped, with the same pages behind it, until `owner` is dropped: nothing
    ///   unmaps or remaps it, nor discards its pages (`madvise(MADV_DONTNEED)`, `mremap`) — a
    ///   DMA reads those pages, not whatever replaced them;
    /// - no other registration with this host's context overlaps it.
    pub unsafe fn lock_memory(
        self: &Arc<Self>,
        ptr: *mut u8,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<LockedMemory> {
        let refused = |reason: &str| Error::HostMemory {
            bytes: len,
            reason: reason.into(),
        };
        if len == 0 || !len.is_multiple_of(PAGE) || !(ptr as usize).is_multiple_of(PAGE) {
            return Err(refused(
                "page-locking someone else's memory takes a nonempty range of whole pages",
            ));
        }
        // SAFETY: forwarded to the caller (above).
        let region = unsafe { Pinned::foreign(self, ptr, len, owner) };
        self.fresh(|| {
            let generation = self.enter()?;
            region.register_for(generation)
        })?;
        Ok(LockedMemory {
            region: Arc::new(region),
        })
    }
}

impl LockedMemory {
    /// The address of its first byte.
    pub fn addr(&self) -> usize {
        self.region.ptr() as usize
    }

    /// Bytes locked.
    pub fn len(&self) -> usize {
        self.region.cap()
    }

    /// True for none (never: [`Host::lock_memory`] refuses an empty range).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device whose host it is locked with.
    pub fn device(&self) -> usize {
        self.region.host().ordinal()
    }

    /// Times it was registered with the host's context: 1, plus one per context loss after
    /// which a transfer registered it with the new context.
    pub fn registrations(&self) -> usize {
        self.region.registrations()
    }

    /// Whether a DMA may still read it: a transfer's batch holds it (its future was dropped
    /// midway), or a DMA's end was never observed.
    pub fn in_use(&self) -> bool {
        Arc::strong_count(&self.region) > 1 || self.region.is_unknown()
    }
}

impl Stream {
    /// Copies `parts` — ranges of locked memory (offsets from each one's first byte; handles or
    /// references to them), laid end to end — into `dst` from `offset`, one DMA per part, no
    /// staging copy, after the work queued on this stream before it; done when the future resolves.
    /// Every DMA is enqueued before the first is awaited, so the copy engine runs them back to
    /// back. The calling thread never waits for the device. After a context loss the memory is
    /// registered with the new context first.
    ///
    /// The memory is read by the DMAs until the future resolves: bytes written there meanwhile
    /// reach the device or not. Dropping the future midway lets the copies run on (`dst`'s bytes
    /// there are then unspecified), and the memory stays locked, its owner alive, until they end.
    pub async fn upload_locked(
        &self,
        dst: &DeviceBuffer,
        offset: usize,
        parts: &[(impl Borrow<LockedMemory>, Range<usize>)],
    ) -> Result<()> {
        let mut len = 0usize;
        for (src, range) in parts {
            let src = src.borrow();
            check_host_range(range, src.len())?;
            self.check_host("locked memory", src.region.host())?;
            len = len.saturating_add(range.len());
        }
        dst.range(offset, len)?;
        let generation = self.enter_with(dst)?;
        let mut fences = Vec::with_capacity(parts.len());
        let mut at = offset;
        for (src, range) in parts.iter().filter(|(_, r)| !r.is_empty()) {
            let region = &src.borrow().region;
            let fence = self.enqueue_direct(Dir::Up, dst, at, region, range.clone(), generation)?;
            fences.push(fence);
            at += range.len();
        }
        for fence in fences {
            fence.await?;
        }
        Ok(())
    }
}
