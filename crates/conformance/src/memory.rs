//! Device and pinned host allocations as safe types, each owning one allocation and an `Arc` to
//! its context.

use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::context::{Context, record_drop_error};
use crate::error::{Error, Result};

/// `len` bytes of device memory from `cuMemAlloc`.
#[derive(Debug)]
pub struct DeviceBuffer {
    pub(crate) raw: sys::CUdeviceptr,
    len: usize,
    ctx: Arc<Context>,
}

impl DeviceBuffer {
    /// Allocates `len` bytes (at least 1) in `ctx`.
    pub fn alloc(ctx: &Arc<Context>, len: usize) -> Result<DeviceBuffer> {
        ctx.bind()?;
        // SAFETY: a context is current on this thread; the size is non-zero.
        let raw = unsafe { result::malloc_sync(len.max(1)) }
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        Ok(DeviceBuffer {
            raw,
            len,
            ctx: Arc::clone(ctx),
        })
    }

    /// The device address.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.raw
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` to the start of the buffer (synchronous).
    pub fn write(&self, data: &[u8]) -> Result<()> {
        self.write_at(0, data)
    }

    /// Copies `data` into the buffer at byte `offset` (synchronous).
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_len(offset.saturating_add(data.len()))?;
        self.ctx.bind()?;
        // SAFETY: [raw + offset, raw + offset + data.len()) lies inside this live allocation
        // (checked above).
        unsafe { result::memcpy_htod_sync(self.raw + offset as u64, data) }
            .map_err(|e| Error::driver("cuMemcpyHtoD", e))?;
        // From pageable memory cuMemcpyHtoD may return with its DMA still queued on the legacy
        // default stream, which kernels on non-blocking streams do not wait for: on the H200 a
        // sandboxed case's outputs once came back as the poison written before its launch.
        // SAFETY: the legacy default stream of the context bound above.
        unsafe { result::stream::synchronize(std::ptr::null_mut()) }
            .map_err(|e| Error::driver("cuStreamSynchronize", e))
    }

    /// Copies `out.len()` bytes from byte `offset` of the buffer into `out` (synchronous).
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_len(offset.saturating_add(out.len()))?;
        self.ctx.bind()?;
        // SAFETY: the source range lies inside this live allocation (checked above); `out` is
        // writable.
        unsafe { result::memcpy_dtoh_sync(out, self.raw + offset as u64) }
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))
    }

    /// Copies the start of the buffer into `out` (synchronous).
    pub fn read(&self, out: &mut [u8]) -> Result<()> {
        self.check_len(out.len())?;
        self.ctx.bind()?;
        // SAFETY: the source range lies inside this live allocation; `out` is writable.
        unsafe { result::memcpy_dtoh_sync(out, self.raw) }
            .map_err(|e| Error::driver("cuMemcpyDtoH", e))
    }

    /// The whole buffer as a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.len];
        self.read(&mut out)?;
        Ok(out)
    }

    /// Sets every byte to `value`, and waits until it has. cuMemsetD8 on device memory returns
    /// before the device has run it (it goes on the legacy stream), so a kernel launched next on
    /// a non-blocking stream could run first: on the H200 with parallel test threads it did, and
    /// saw a control block's stale epoch (its threads exited) or had its outputs poisoned after
    /// it wrote them.
    pub fn fill(&self, value: u8) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: the range covers exactly this live allocation.
        unsafe { result::memset_d8_sync(self.raw, value, self.len) }
            .map_err(|e| Error::driver("cuMemsetD8", e))?;
        // SAFETY: the legacy default stream of the context bound above.
        unsafe { result::stream::synchronize(std::ptr::null_mut()) }
            .map_err(|e| Error::driver("cuStreamSynchronize", e))
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n > self.len {
            return Err(Error::BadCase {
                case: "DeviceBuffer".into(),
                detail: format!("copy of {n} bytes into a {}-byte buffer", self.len),
            });
        }
        Ok(())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind() {
            eprintln!("conformance: cannot bind context to free a buffer: {e}");
            return;
        }
        // SAFETY: `raw` came from cuMemAlloc in this context and is freed exactly once, here.
        if let Err(e) = unsafe { result::free_sync(self.raw) } {
            record_drop_error("cuMemFree", e);
        }
    }
}

/// `len` bytes of page-locked host memory from `cuMemAllocHost`, readable from host callbacks
/// once the copies into it have completed in stream order.
#[derive(Debug)]
pub struct PinnedBuffer {
    pub(crate) raw: *mut u8,
    len: usize,
    ctx: Arc<Context>,
}

// SAFETY: pinned host memory is plain process memory; the pointer is owned by this value and
// only read through `read`, which copies out.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above; concurrent `read`s only read.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` (at least 1) zeroed bytes of pinned host memory.
    pub fn alloc(ctx: &Arc<Context>, len: usize) -> Result<PinnedBuffer> {
        ctx.bind()?;
        // SAFETY: a context is current; flags 0 asks for plain portable-less pinned memory.
        let raw = unsafe { result::malloc_host(len.max(1), 0) }
            .map_err(|e| Error::driver("cuMemAllocHost", e))?;
        let raw = raw.cast::<u8>();
        // SAFETY: `raw` points to at least `len` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(raw, 0, len) };
        Ok(PinnedBuffer {
            raw,
            len,
            ctx: Arc::clone(ctx),
        })
    }

    /// The host address, for async copies.
    pub fn ptr(&self) -> *mut u8 {
        self.raw
    }

    /// The address kernels use for this memory (cuMemHostGetDevicePointer): pinned memory is
    /// mapped into the device's address space under unified addressing.
    pub fn device_ptr(&self) -> Result<sys::CUdeviceptr> {
        self.ctx.bind()?;
        let mut dptr: sys::CUdeviceptr = 0;
        // SAFETY: `raw` is the start of this live cuMemAllocHost allocation; `dptr` is a valid
        // out-pointer; the flags argument must be 0.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, self.raw.cast(), 0) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::driver(
                "cuMemHostGetDevicePointer",
                result::DriverError(r),
            ));
        }
        Ok(dptr)
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of the current contents. Call only when no copy into it is in flight.
    pub fn read(&self) -> Vec<u8> {
        // SAFETY: `raw` is valid for `len` bytes for our lifetime; the caller ensures no device
        // copy is writing concurrently (stream order or a synchronize).
        unsafe { std::slice::from_raw_parts(self.raw, self.len) }.to_vec()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind() {
            eprintln!("conformance: cannot bind context to free pinned memory: {e}");
            return;
        }
        // SAFETY: `raw` came from cuMemAllocHost and is freed exactly once, here.
        if let Err(e) = unsafe { result::free_host(self.raw.cast()) } {
            record_drop_error("cuMemFreeHost", e);
        }
    }
}
