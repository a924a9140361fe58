//! Where a buffer's own allocation comes from and goes back to: stream-ordered allocation on a
//! host-internal stream, so that freeing never waits for the device.
//!
//! Why: on the H200 (driver 580), cuMemFree waits until every kernel running in the context has
//! ended and holds every other thread's driver calls (launches, event records) meanwhile
//! (bench/h200-runs/2026-12-02-s12/unload-stall/README.md). A sandboxed guest's kernel may run
//! for its whole `max_kernel_time` (10 s by default), so one large buffer dropped anywhere would
//! stall every guest and every request that long. cuMemAllocAsync and cuMemFreeAsync (and
//! synchronizing the stream they were queued on) wait for nothing and hold nobody there.
//!
//! Why not the virtual memory API (cuMemCreate/Map/Unmap/Release), which does not stall either:
//! it maps whole granules (2 MiB on the H200), so every small buffer would take 2 MiB and four
//! driver calls; gpuhost's arenas use it where one large range pays for that.
//!
//! How:
//! - Allocation: cuMemAllocAsync from the device's current pool on the host's internal stream,
//!   then cuStreamSynchronize of that stream, once: the memory is then usable by every stream.
//!   The internal stream carries nothing but these allocations and frees, so the wait is for
//!   them alone.
//! - Free: cuMemFreeAsync on the internal stream. Safe without ordering against other streams
//!   because gpuhost frees a buffer only when its last holder and every launch given it are gone
//!   (buffer.rs), and blocks kept by the allocation cache only when it is trimmed. Then the
//!   internal stream is synchronized: the pool (release threshold left at 0) gives the memory
//!   back to the device then, so cuMemGetInfo counts it free as it did after cuMemFree.
//! - Out of memory: unchanged. An allocation the driver refuses first frees the blocks the
//!   allocation cache keeps, then tries once more (alloc_cache.rs).
//! - The internal stream belongs to one context generation; after a loss a new one is made (the
//!   old one died with its context and is forgotten). It is never handed out, so it is not
//!   counted in `HostStats::live_streams`.
//! - A driver without stream-ordered pools (no cuMemAllocAsync, or the device's
//!   `MEMORY_POOLS_SUPPORTED` is 0) gets cuMemAlloc and cuMemFree, as before.

use std::sync::{Mutex, OnceLock, PoisonError};

use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr, CUresult, CUstream};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::result::{self, DriverResult, has_symbol};
use crate::stats::Counters;

/// A host's allocation path: whether it is stream-ordered, and its internal stream.
#[derive(Default)]
pub(crate) struct DeviceAlloc {
    /// Whether the driver has stream-ordered pools on this device (read on first use).
    pooled: OnceLock<bool>,
    /// The internal stream and the generation it belongs to.
    stream: Mutex<Option<(u64, usize)>>,
}

impl DeviceAlloc {
    fn pooled(&self, host: &Host) -> bool {
        *self.pooled.get_or_init(|| {
            has_symbol("cuMemAllocAsync")
                && has_symbol("cuMemFreeAsync")
                && result::ctx::attribute(
                    host.dev,
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                )
                .is_ok_and(|v| v != 0)
        })
    }

    /// The internal stream of `generation` (made on first use); the caller has entered it.
    fn stream(&self, host: &Host, generation: u64) -> Result<CUstream> {
        let mut s = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        match *s {
            Some((g, raw)) if g == generation => return Ok(raw as CUstream),
            // The caller's generation ended while it was on its way here.
            Some((g, _)) if g > generation => return Err(Error::ContextLost { generation: g }),
            _ => {}
        }
        // SAFETY: the caller bound the context of `generation`; the stream is the host's, kept
        // for that generation's life and forgotten (never destroyed) after it.
        let raw = host.check_at(unsafe { result::stream::create_non_blocking() }, generation)?;
        *s = Some((generation, raw as usize));
        Ok(raw)
    }

    /// `size` bytes of device memory of `generation`, which the caller has entered; when the
    /// device has too little left, once more after the host's kept blocks are freed.
    pub(crate) fn alloc(&self, host: &Host, size: usize, generation: u64) -> Result<CUdeviceptr> {
        let mut r = self.try_alloc(host, size, generation)?;
        if r.as_ref()
            .is_err_and(|e| e.code == CUresult::CUDA_ERROR_OUT_OF_MEMORY)
            && host.trim_alloc_cache_in(generation) > 0
        {
            r = self.try_alloc(host, size, generation)?;
        }
        let raw = host.check_at(r, generation)?;
        Counters::inc(&host.counters.driver_allocs);
        Ok(raw)
    }

    /// One attempt: the driver's answer, or an error met before asking it.
    fn try_alloc(
        &self,
        host: &Host,
        size: usize,
        generation: u64,
    ) -> Result<DriverResult<CUdeviceptr>> {
        if !self.pooled(host) {
            // SAFETY: context bound by the caller; the buffer made of it frees it once.
            return Ok(unsafe { result::mem::alloc(size) });
        }
        let stream = self.stream(host, generation)?;
        // SAFETY: the internal stream of the bound context; it is synchronized below before
        // anything else uses the memory, and the buffer made of it frees it once.
        let raw = match unsafe { result::mem::alloc_async(size, stream) } {
            Ok(raw) => raw,
            Err(e) => return Ok(Err(e)),
        };
        // SAFETY: a live stream of the bound context.
        if let Err(e) = unsafe { result::stream::synchronize(stream) } {
            // SAFETY: our allocation, never handed out; the stream orders the free after it.
            let _ = unsafe { result::mem::free_async(raw, stream) };
            return Ok(Err(e));
        }
        Ok(Ok(raw))
    }

    /// Frees `blocks` of `generation`, which the caller has entered and which nothing uses any
    /// more (see the module header); failures are recorded as drop errors.
    pub(crate) fn free(&self, host: &Host, generation: u64, blocks: &[CUdeviceptr]) {
        if blocks.is_empty() {
            return;
        }
        if !self.pooled(host) {
            for &raw in blocks {
                // SAFETY: ours, of the bound context, used by nothing (the caller's promise).
                let r = unsafe { result::mem::free(raw) };
                if let Err(e) = host.check(r) {
                    host.drop_error("freeing device memory", &e);
                }
            }
            return;
        }
        let stream = match self.stream(host, generation) {
            Ok(s) => s,
            Err(Error::ContextLost { .. }) => return, // the memory went with its context
            Err(e) => return host.drop_error("freeing device memory", &e),
        };
        for &raw in blocks {
            // SAFETY: ours, of the bound context, used by no queued or running work (the
            // caller's promise); the internal stream is live for this generation.
            let r = unsafe { result::mem::free_async(raw, stream) };
            if let Err(e) = host.check(r) {
                host.drop_error("freeing device memory", &e);
            }
        }
        // SAFETY: a live stream of the bound context. Only allocations and frees run on it, so
        // this waits for no kernel; the pool returns the freed memory to the device here.
        let r = unsafe { result::stream::synchronize(stream) };
        if let Err(e) = host.check(r) {
            host.drop_error("freeing device memory", &e);
        }
    }
}
