//! A control block: a few bytes of page-locked host memory that kernels read and write while
//! they run (the sandbox's abort epoch and fault word), and the host reads and writes at the same
//! time with atomic loads and stores.
//!
//! The memory is gpuhost's own (one zeroed page from the Rust allocator), page-locked and mapped
//! for the device with cuMemHostRegister(DEVICEMAP); the kernel's address comes from
//! cuMemHostGetDevicePointer. Owning the page, rather than taking it from cuMemHostAlloc, keeps
//! host loads and stores valid even after a foreign context reset, which drops only the
//! registration (the staging chunks of transfers use the same rule).

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cudarc::driver::sys;

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::stats::Counters;

/// Bytes of a control block kernels may use.
pub const CONTROL_BYTES: usize = 64;

/// What is allocated and registered: one page.
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
            .field("device_ptr", &format_args!("{:#x}", self.shared.device))
            .field("generation", &self.shared.generation)
            .finish()
    }
}

pub(crate) struct ControlShared {
    host: Arc<Host>,
    generation: u64,
    ptr: NonNull<u8>,
    device: u64,
}

// SAFETY: the page is owned by this value and only accessed through atomics (by the host) or by
// the device; the pointer is a handle to it, valid from any thread.
unsafe impl Send for ControlShared {}
// SAFETY: as above: all shared access is atomic.
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
        // SAFETY: the layout has a nonzero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout()) };
        let ptr = NonNull::new(raw).ok_or(Error::Driver {
            call: "alloc_zeroed",
            code: sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32,
            name: "out of host memory for a control block".into(),
        })?;
        let free = || {
            // SAFETY: allocated above with this layout, not registered (or unregistered), freed once.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout()) }
        };
        // SAFETY: the page is ours, live and page-aligned; the context is bound by enter().
        let r = unsafe {
            sys::cuMemHostRegister_v2(ptr.as_ptr().cast(), PAGE, sys::CU_MEMHOSTREGISTER_DEVICEMAP)
        };
        if let Err(e) = host.classify("cuMemHostRegister_v2", r) {
            free();
            return Err(e);
        }
        let mut device = 0;
        // SAFETY: valid out pointer; the page was just registered with DEVICEMAP.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, ptr.as_ptr().cast(), 0) };
        if let Err(e) = host.classify("cuMemHostGetDevicePointer_v2", r) {
            // SAFETY: undoes the registration just made; nothing uses it yet.
            unsafe { sys::cuMemHostUnregister(ptr.as_ptr().cast()) };
            free();
            return Err(e);
        }
        Counters::inc(&host.counters.live_control_blocks);
        Ok(ControlBlock {
            shared: Arc::new(ControlShared {
                host: Arc::clone(host),
                generation,
                ptr,
                device,
            }),
        })
    }

    /// The device address kernels use.
    pub fn device_ptr(&self) -> u64 {
        self.shared.device
    }

    /// The context generation it was registered in.
    pub fn generation(&self) -> u64 {
        self.shared.generation
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= CONTROL_BYTES,
            "control block offset {offset} must be a multiple of 4 below {CONTROL_BYTES}"
        );
        // SAFETY: the offset lies inside our live, 4-aligned page (checked above); every host
        // access to it is atomic, and the device's are naturally aligned 32-bit accesses.
        unsafe { AtomicU32::from_ptr(self.shared.ptr.as_ptr().add(offset).cast()) }
    }

    /// The u32 at `offset` (an atomic load: kernels may be writing it).
    ///
    /// # Panics
    /// If `offset` is not a multiple of 4 below [`CONTROL_BYTES`] (a programming error).
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.word(offset).load(Ordering::SeqCst)
    }

    /// Stores `v` at `offset` (an atomic store: kernels may be reading it).
    ///
    /// # Panics
    /// As [`ControlBlock::load_u32`].
    pub fn store_u32(&self, offset: usize, v: u32) {
        self.word(offset).store(v, Ordering::SeqCst)
    }

    /// A [`CONTROL_BYTES`]-byte buffer over the block at [`ControlBlock::device_ptr`]: pass it
    /// as `Arg::Buffer(&anchor, 0)` for the kernel parameter that receives the control block,
    /// so the block outlives every launch given it.
    pub fn anchor(&self) -> DeviceBuffer {
        DeviceBuffer::from_control(
            &self.shared.host,
            &self.shared,
            self.shared.device,
            CONTROL_BYTES,
            self.shared.generation,
        )
    }
}

impl Drop for ControlShared {
    fn drop(&mut self) {
        Counters::dec(&self.host.counters.live_control_blocks);
        // A dead generation's registration died with its context; the page is still ours.
        self.host
            .release_in(self.generation, "unregister a control block", || {
                // SAFETY: our registration; no launch given the block is still running (they hold
                // anchors, which hold this).
                let r = unsafe { sys::cuMemHostUnregister(self.ptr.as_ptr().cast()) };
                if let Err(e) = self.host.classify("cuMemHostUnregister", r) {
                    self.host.drop_error("unregistering a control block", &e);
                }
            });
        // SAFETY: allocated in create() with this layout, freed once; no device access can
        // reach it any more (unregistered, or its context is gone).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout()) };
    }
}
