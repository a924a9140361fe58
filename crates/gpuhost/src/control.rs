//! A control block: a few bytes of device memory that kernels read and write while they run (the
//! sandbox's abort epoch and fault word), and the host reads and writes at the same time.
//!
//! Where the bytes live was measured on the H200 (bench/h200-runs/2026-12-01-mid/probe.log): a
//! kernel polling host-mapped memory every 1024 loop iterations ran 126x slower than without
//! polling (every 64: 2000x), since each poll is a PCIe read; polling device memory cost nothing
//! measurable. So the block is device memory, and the host reaches it with 4-byte copies on the
//! block's own non-blocking stream: those run on a copy engine beside the kernels (on softcuda,
//! on that stream's own worker thread), never queued behind a runaway kernel.
//!
//! The host side of each copy is a page of gpuhost's own memory registered with
//! cuMemHostRegister, not cuMemAllocHost: a foreign context reset then drops only the
//! registration, never memory the host still touches (the staging chunks of transfers use the
//! same rule).

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::{self, CUstream};

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::stats::Counters;

/// Bytes of a control block kernels may use.
pub const CONTROL_BYTES: usize = 64;

/// What is allocated and registered on the host for the copies: one page.
const PAGE: usize = 4096;

/// A guest's control block; clones share it. Freed when the last clone and the last
/// [`ControlBlock::anchor`] (and so every launch given one) are gone.
#[derive(Clone)]
pub struct ControlBlock {
    shared: Arc<ControlShared>,
}

impl std::fmt::Debug for ControlBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlBlock")
            .field(
                "device_ptr",
                &format_args!("{:#x}", self.shared.device.device_ptr()),
            )
            .field("generation", &self.shared.generation)
            .finish()
    }
}

struct ControlShared {
    host: Arc<Host>,
    generation: u64,
    /// The registered host page the copies go through; only touched with `copies` held.
    page: NonNull<u8>,
    /// The block's device memory (its clones are the anchors launches hold).
    device: DeviceBuffer,
    /// The block's own non-blocking stream, for the copies; `copies` serializes its use.
    stream: CUstream,
    copies: Mutex<()>,
}

// SAFETY: the page and stream are owned by this value; the page is only touched, and the stream
// only used, with `copies` held (or in Drop, with no other holder left).
unsafe impl Send for ControlShared {}
// SAFETY: as above: shared use goes through the `copies` mutex.
unsafe impl Sync for ControlShared {}

fn layout() -> Layout {
    // PAGE is a nonzero power of two, so this never fails.
    Layout::from_size_align(PAGE, PAGE).unwrap_or(Layout::new::<u8>())
}

impl Host {
    /// A control block: [`CONTROL_BYTES`] of zeroed, page-locked host memory the device can read
    /// and write.
    pub fn control_block(self: &Arc<Self>) -> Result<ControlBlock> {
        self.fresh(|| ControlBlock::create(self))
    }
}

impl ControlBlock {
    fn create(host: &Arc<Host>) -> Result<ControlBlock> {
        let generation = host.enter()?;
        let device = DeviceBuffer::alloc(host, CONTROL_BYTES)?;
        device.write(0, &[0; CONTROL_BYTES])?;
        // SAFETY: the layout has a nonzero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout()) };
        let page = NonNull::new(raw).ok_or(Error::Driver {
            call: "alloc_zeroed",
            code: sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32,
            name: "out of host memory for a control block".into(),
        })?;
        let free = || {
            // SAFETY: allocated above with this layout, not registered (or unregistered), freed once.
            unsafe { std::alloc::dealloc(page.as_ptr(), layout()) }
        };
        // SAFETY: the page is ours, live and page-aligned; the context is bound by enter().
        let r = unsafe { sys::cuMemHostRegister_v2(page.as_ptr().cast(), PAGE, 0) };
        if let Err(e) = host.classify("cuMemHostRegister_v2", r) {
            free();
            return Err(e);
        }
        let mut stream: CUstream = std::ptr::null_mut();
        // SAFETY: valid out pointer; the context is bound.
        let r = unsafe {
            sys::cuStreamCreate(
                &mut stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        };
        if let Err(e) = host.classify("cuStreamCreate", r) {
            // SAFETY: undoes the registration just made; nothing uses it yet.
            unsafe { sys::cuMemHostUnregister(page.as_ptr().cast()) };
            free();
            return Err(e);
        }
        Counters::inc(&host.counters.live_control_blocks);
        Ok(ControlBlock {
            shared: Arc::new(ControlShared {
                host: Arc::clone(host),
                generation,
                page,
                device,
                stream,
                copies: Mutex::new(()),
            }),
        })
    }

    /// The device address kernels use.
    pub fn device_ptr(&self) -> u64 {
        self.shared.device.device_ptr()
    }

    /// The context generation it was registered in.
    pub fn generation(&self) -> u64 {
        self.shared.generation
    }

    fn check_offset(offset: usize) {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= CONTROL_BYTES,
            "control block offset {offset} must be a multiple of 4 below {CONTROL_BYTES}"
        );
    }

    /// Copies the word at `offset` between the device and the host page, one way, on the
    /// block's stream, and waits for that copy alone (never for the guest's kernels).
    fn copy_word(&self, offset: usize, to_device: bool, value: u32) -> Result<u32> {
        Self::check_offset(offset);
        let s = &self.shared;
        let _copies = s.copies.lock().unwrap_or_else(PoisonError::into_inner);
        s.host.enter_for(s.generation)?;
        // SAFETY: offset + 4 lies inside our page (checked above), which is live, 4-aligned and
        // only touched with `copies` held.
        let word = unsafe { s.page.as_ptr().add(offset) }.cast::<u32>();
        let dptr = s.device.device_ptr() + offset as u64;
        let r = if to_device {
            // SAFETY: as above; no copy is in flight on the page (each waits for its own).
            unsafe { word.write_volatile(value) };
            // SAFETY: both ranges are 4 live bytes (our registered page; the block's allocation,
            // kept alive by `device`); the stream is ours and the context is bound.
            unsafe { sys::cuMemcpyHtoDAsync_v2(dptr, word.cast(), 4, s.stream) }
        } else {
            // SAFETY: as above, the other way.
            unsafe { sys::cuMemcpyDtoHAsync_v2(word.cast(), dptr, 4, s.stream) }
        };
        s.host.classify("cuMemcpyAsync (control block)", r)?;
        // SAFETY: our stream, in the bound context.
        let r = unsafe { sys::cuStreamSynchronize(s.stream) };
        s.host.classify("cuStreamSynchronize (control block)", r)?;
        // SAFETY: the copy into the word has completed (synchronized above).
        Ok(unsafe { word.read_volatile() })
    }

    /// The u32 at `offset`, as kernels see it now (a copy on the block's own stream, so it does
    /// not wait for them).
    ///
    /// # Panics
    /// If `offset` is not a multiple of 4 below [`CONTROL_BYTES`] (a programming error).
    pub fn try_load_u32(&self, offset: usize) -> Result<u32> {
        self.copy_word(offset, false, 0)
    }

    /// Stores `v` at `offset` where running kernels see it (a copy on the block's own stream).
    ///
    /// # Panics
    /// As [`ControlBlock::try_load_u32`].
    pub fn try_store_u32(&self, offset: usize, v: u32) -> Result<()> {
        self.copy_word(offset, true, v).map(|_| ())
    }

    /// [`ControlBlock::try_load_u32`], reading 0 when the copy fails: that happens only when the
    /// context is gone, and with it every kernel that could have written the block (the
    /// failure is counted in the host's `drop_errors` and logged).
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.try_load_u32(offset).unwrap_or_else(|e| {
            self.shared.host.drop_error("reading a control block", &e);
            0
        })
    }

    /// [`ControlBlock::try_store_u32`], ignoring a failure for the same reason as
    /// [`ControlBlock::load_u32`]: no kernel is left to see the word.
    pub fn store_u32(&self, offset: usize, v: u32) {
        if let Err(e) = self.try_store_u32(offset, v) {
            self.shared.host.drop_error("writing a control block", &e);
        }
    }

    /// Makes the block ready for another guest when this is its only handle and no anchor
    /// (so no launch given one) is left: all [`CONTROL_BYTES`] zeroed, as a new block is, so no
    /// epoch or fault word of the last guest reaches the next. Returns false, changing nothing,
    /// while anything else holds it.
    pub fn reset_for_reuse(&mut self) -> Result<bool> {
        let s = &self.shared;
        if Arc::strong_count(s) != 1 || Arc::strong_count(&s.device.inner) != 1 {
            return Ok(false);
        }
        s.host.enter_for(s.generation)?;
        // SAFETY: the block's own live allocation of CONTROL_BYTES; no kernel can use it (no
        // anchor is left) and the context is bound.
        let r = unsafe { sys::cuMemsetD8_v2(s.device.device_ptr(), 0, CONTROL_BYTES) };
        s.host.classify("cuMemsetD8_v2 (control block)", r)?;
        // The memset is asynchronous to the host and the guests' streams are non-blocking:
        // wait for it before a next launch can see the block.
        // SAFETY: the legacy default stream of the bound context.
        let r = unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) };
        s.host.classify("cuStreamSynchronize", r)?;
        Ok(true)
    }

    /// A [`CONTROL_BYTES`]-byte buffer over the block at [`ControlBlock::device_ptr`]: pass it
    /// as `Arg::Buffer(&anchor, 0)` for the kernel parameter that receives the control block,
    /// so the block outlives every launch given it.
    pub fn anchor(&self) -> DeviceBuffer {
        self.shared.device.clone()
    }
}

impl Drop for ControlShared {
    fn drop(&mut self) {
        Counters::dec(&self.host.counters.live_control_blocks);
        // A dead generation's stream and registration died with its context; the page is
        // still ours. The device memory is `device`'s, freed by its own drop.
        self.host
            .release_in(self.generation, "release a control block's stream", || {
                // SAFETY: our stream and registration; every copy on the stream was waited for.
                let r = unsafe { sys::cuStreamDestroy_v2(self.stream) };
                if let Err(e) = self.host.classify("cuStreamDestroy_v2", r) {
                    self.host
                        .drop_error("destroying a control block's stream", &e);
                }
                // SAFETY: as above.
                let r = unsafe { sys::cuMemHostUnregister(self.page.as_ptr().cast()) };
                if let Err(e) = self.host.classify("cuMemHostUnregister", r) {
                    self.host.drop_error("unregistering a control block", &e);
                }
            });
        // SAFETY: allocated in create() with this layout, freed once; no copy can reach it any
        // more (each was waited for, and the registration is gone).
        unsafe { std::alloc::dealloc(self.page.as_ptr(), layout()) };
    }
}
