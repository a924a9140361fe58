//! The memory behind control blocks: managed memory of a private context, which the host reads
//! and writes with plain CPU atomics while kernels run, and which no primary-context reset frees.
//!
//! Why managed memory, measured on the H200 (scripts/probes/stop-probe.cu,
//! bench/h200-runs/2026-12-01-s4/): a 4-byte copy into device memory on the block's own stream
//! (the first design) hung whenever another thread was inside a driver call that waits for the
//! device, for the kernel the copy was meant to stop: launching a kernel that grows local memory,
//! cuModuleLoadData, cuMemAlloc of 1 GiB, cuMemFree, cuMemAllocHost all did it (libcuda's
//! internal lock; cuStreamWriteValue32 hung behind two of them). A CPU store to managed memory
//! makes no driver call: it stopped the kernel in 0.1 ms behind every one of them, and kernels
//! poll managed memory as cheaply as device memory. The host's read of a fault word after a
//! synchronize became a CPU load (8.5 µs round trip instead of 15.9 µs with a copy).
//!
//! Why a private context: managed memory of the primary context is freed by a foreign
//! cuDevicePrimaryCtxReset, after which a CPU access faults (the probe saw EFAULT). Memory of a
//! context only gpuhost knows outlives any reset of the primary one, and kernels of the primary
//! context (of any generation) use it as their own (managed memory is process-wide).
//!
//! Layout: a slab is 4 MiB. Its first half holds each slot's host window (one 4 KiB page per
//! slot: words the host writes and kernels read, preferred on the device); its second half the
//! device windows, [`DEVICE_WINDOW`] further on (words kernels write and the host reads,
//! preferred in host memory). Separate pages, far apart, so neither side's accesses migrate the
//! other's words. The host window's page also holds the start counters
//! ([`START_COUNTER_OFFSET`]): kernels' atomics on them stay on the device, where a host-memory
//! word would need atomics over PCIe, and the host reads them only when it must know whether a
//! launch past its time limit ever began. Their time words ([`START_TIME_OFFSET`]) are in the
//! device window's page, written with plain stores, and read by the host every tick.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdeviceptr, CUresult};

use crate::error::{Error, Result};
use crate::result::{self, DriverError};

/// Bytes of each window kernels and host may use.
pub const CONTROL_BYTES: usize = 64;
/// Distance from a block's host window (its device pointer) to its device window.
pub const DEVICE_WINDOW: usize = 2 << 20;
/// Counters in which kernels count their launches' starts (ptxvm's sandbox: one per stream of a
/// guest), in the host window's page past the words the host writes: kernels add to them on
/// the device, and the host reads one only to decide whether to stop a launch. Each has a
/// 64-bit word in the device window's page too, where the launch's first thread stores the
/// time it began: host memory, which the host reads as often as it likes.
pub const START_COUNTERS: usize = 256;
/// Offset of start counter 0 from a block's device pointer.
pub const START_COUNTER_OFFSET: usize = 2048;
/// Offset of start counter 0's time word from a block's device pointer.
pub const START_TIME_OFFSET: usize = DEVICE_WINDOW + 2048;
/// One slot's page in each half.
const SLOT: usize = 4096;
const _: () = assert!(
    CONTROL_BYTES <= START_COUNTER_OFFSET
        && START_COUNTER_OFFSET + 4 * START_COUNTERS <= SLOT
        && START_TIME_OFFSET - DEVICE_WINDOW >= CONTROL_BYTES
        && START_TIME_OFFSET - DEVICE_WINDOW + 8 * START_COUNTERS <= SLOT
);
const SLAB: usize = 2 * DEVICE_WINDOW;
const HOST_WORDS: usize = CONTROL_BYTES / 4;

/// One control block's place in a slab, with what the host last stored in its host window.
pub(crate) struct Slot {
    addr: CUdeviceptr,
    /// The host window as the host wrote it: kernels never write it, so a store of the value
    /// already there is skipped, and the page stays on the device.
    shadow: [AtomicU32; HOST_WORDS],
    /// Serialises stores, so the shadow and the memory agree.
    stores: Mutex<()>,
    /// Per start counter, the launches issued on it over the slot's life (every guest that had
    /// it): the count it reaches once they have all started. Kept across guests because the
    /// counters are never cleared (a CPU store would move their page off the device).
    issued: Box<[AtomicU32]>,
}

impl Slot {
    pub(crate) fn addr(&self) -> CUdeviceptr {
        self.addr
    }

    /// The word at `offset` (in the host window, or at [`DEVICE_WINDOW`] + the device window).
    ///
    /// # Panics
    /// If `offset` is not a multiple of 4 inside either window (a programming error).
    fn word(&self, offset: usize) -> &AtomicU32 {
        let in_window = |o: usize| o.is_multiple_of(4) && o + 4 <= CONTROL_BYTES;
        assert!(
            in_window(offset) || offset.checked_sub(DEVICE_WINDOW).is_some_and(in_window),
            "control block offset {offset:#x} must be a multiple of 4 below {CONTROL_BYTES}, \
             alone or plus DEVICE_WINDOW"
        );
        // SAFETY: addr + offset lies in this slot's page of a live slab (the pool frees slabs
        // only when it goes, and every Slot holder keeps the pool), 4-aligned (pages are, and so
        // is offset). Managed memory is ordinary host memory to the CPU; the device's accesses
        // to it are the protocol this block exists for, outside Rust's memory model either way.
        unsafe { AtomicU32::from_ptr((self.addr as usize + offset) as *mut u32) }
    }

    pub(crate) fn load(&self, offset: usize) -> u32 {
        self.word(offset).load(Ordering::SeqCst)
    }

    pub(crate) fn store(&self, offset: usize, v: u32) {
        let _stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        if offset < CONTROL_BYTES && self.shadow[offset / 4].swap(v, Ordering::SeqCst) == v {
            return;
        }
        self.word(offset).store(v, Ordering::SeqCst);
    }

    /// Start counter `i` ([`START_COUNTER_OFFSET`]).
    ///
    /// # Panics
    /// If `i` is not below [`START_COUNTERS`] (a programming error).
    fn counter(&self, i: usize) -> &AtomicU32 {
        assert!(i < START_COUNTERS, "start counter {i} of {START_COUNTERS}");
        // SAFETY: the counters lie in this slot's page of a live slab (as in `word`), 4-aligned;
        // kernels change them only with atomics.
        unsafe {
            AtomicU32::from_ptr((self.addr as usize + START_COUNTER_OFFSET + 4 * i) as *mut u32)
        }
    }

    /// Start counter `i` as kernels left it.
    pub(crate) fn started(&self, i: usize) -> u32 {
        self.counter(i).load(Ordering::SeqCst)
    }

    /// The time word of start counter `i` ([`START_TIME_OFFSET`]) as kernels left it.
    ///
    /// # Panics
    /// If `i` is not below [`START_COUNTERS`] (a programming error).
    pub(crate) fn started_at(&self, i: usize) -> u64 {
        assert!(i < START_COUNTERS, "start counter {i} of {START_COUNTERS}");
        let at = self.addr as usize + START_TIME_OFFSET + 8 * i;
        // SAFETY: the word lies in this slot's device-window page of a live slab (as in
        // `word`), 8-aligned; kernels write it with one 64-bit store.
        unsafe { AtomicU64::from_ptr(at as *mut u64) }.load(Ordering::SeqCst)
    }

    /// Counts `n` more launches issued on counter `i`; returns the count before them.
    pub(crate) fn issue(&self, i: usize, n: u32) -> u32 {
        assert!(i < START_COUNTERS, "start counter {i} of {START_COUNTERS}");
        self.issued[i].fetch_add(n, Ordering::SeqCst)
    }

    /// Zeroes what was written, touching only words that are not zero already.
    pub(crate) fn clear(&self) {
        for (i, s) in self.shadow.iter().enumerate() {
            if s.load(Ordering::SeqCst) != 0 {
                self.store(i * 4, 0);
            }
        }
        for off in (0..CONTROL_BYTES).step_by(4).map(|o| DEVICE_WINDOW + o) {
            if self.load(off) != 0 {
                self.store(off, 0);
            }
        }
    }
}

/// A host's control-block memory: a private context and its slabs of managed memory.
pub(crate) struct ControlPool {
    ctx: CUcontext,
    dev: CUdevice,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    slabs: Vec<CUdeviceptr>,
    free: Vec<Arc<Slot>>,
}

// SAFETY: the context handle is a process-wide driver object, used only between our own
// push/pop on the calling thread; the slabs are behind the mutex.
unsafe impl Send for ControlPool {}
// SAFETY: as above.
unsafe impl Sync for ControlPool {}

/// A failed call on the pool's private context: never a loss of the host's context, and never
/// classified as sticky (the host's context is not the one that failed).
fn pool_error(e: DriverError) -> Error {
    Error::Driver {
        call: e.call,
        code: e.code,
        name: format!("{:?} (control block memory)", e.code),
    }
}

impl ControlPool {
    /// Creates the private context (left not current on the calling thread).
    pub(crate) fn new(dev: CUdevice) -> Result<Self> {
        // SAFETY: the driver is initialised (a Host exists); the pool owns the context and
        // destroys it once, on drop.
        let ctx = unsafe { result::ctx::create(dev) }.map_err(pool_error)?;
        // SAFETY: cuCtxCreate made `ctx` current by pushing it; this pops it, giving the thread
        // back the context it had.
        unsafe { result::ctx::pop() }.map_err(pool_error)?;
        Ok(Self {
            ctx,
            dev,
            state: Mutex::new(PoolState::default()),
        })
    }

    /// Runs `f` with the private context current on this thread, then restores the thread's.
    fn within<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: our live context; the matching pop follows whatever `f` returns.
        unsafe { result::ctx::push(self.ctx) }.map_err(pool_error)?;
        let out = f();
        // SAFETY: pops what we pushed.
        let popped = unsafe { result::ctx::pop() };
        out.and_then(|v| popped.map(|_| v).map_err(pool_error))
    }

    /// A zeroed slot (a new slab when none is free).
    pub(crate) fn take(&self) -> Result<Arc<Slot>> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = st.free.pop() {
            return Ok(s);
        }
        let slab = self.within(|| self.new_slab())?;
        st.slabs.push(slab);
        st.free.extend((0..DEVICE_WINDOW / SLOT).rev().map(|i| {
            Arc::new(Slot {
                addr: slab + (i * SLOT) as u64,
                shadow: Default::default(),
                stores: Mutex::new(()),
                issued: (0..START_COUNTERS).map(|_| AtomicU32::new(0)).collect(),
            })
        }));
        st.free.pop().ok_or(Error::Driver {
            call: "control block pool",
            code: CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            name: "an empty slab (never: a slab holds 512 slots)".into(),
        })
    }

    fn new_slab(&self) -> Result<CUdeviceptr> {
        // SAFETY: our context is current (within); the pool frees the slab once, on drop.
        let p = unsafe { result::mem::alloc_managed(SLAB) }.map_err(pool_error)?;
        // SAFETY: a fresh allocation of SLAB bytes that nothing else uses yet.
        unsafe { std::ptr::write_bytes(p as usize as *mut u8, 0, SLAB) };
        let device = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.dev,
        };
        let host = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        };
        use sys::CUmem_advise::*;
        for (at, advice, loc) in [
            (p, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device),
            (
                p + DEVICE_WINDOW as u64,
                CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                host,
            ),
            (
                p + DEVICE_WINDOW as u64,
                CU_MEM_ADVISE_SET_ACCESSED_BY,
                device,
            ),
        ] {
            // SAFETY: a range of our allocation; advice is only a hint about placement.
            let r = unsafe { result::mem::advise(at, DEVICE_WINDOW, advice, loc) };
            // A driver without managed-memory hints (softcuda) places it anywhere: still right.
            if let Err(e) = r {
                tracing::debug!(
                    "cuMemAdvise for control blocks: {:?}; placement left to the driver",
                    e.code
                );
            }
        }
        Ok(p)
    }

    /// Takes a slot back once nothing uses it (its last anchor is gone), zeroed for the next.
    pub(crate) fn give(&self, slot: &Arc<Slot>) {
        slot.clear();
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.free.push(Arc::clone(slot));
    }
}

impl Drop for ControlPool {
    fn drop(&mut self) {
        let slabs = std::mem::take(
            &mut self
                .state
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .slabs,
        );
        let freed = self.within(|| {
            for p in slabs {
                // SAFETY: our allocation; no slot of it is held (each holder keeps the pool).
                unsafe { result::mem::free(p) }.map_err(pool_error)?;
            }
            Ok(())
        });
        // SAFETY: our context, current on no thread (every push was popped).
        let destroyed = unsafe { result::ctx::destroy(self.ctx) }.map_err(pool_error);
        if let Err(e) = freed.and(destroyed) {
            tracing::warn!("releasing control block memory: {e}");
        }
    }
}
