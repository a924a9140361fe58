//! A control block: a few words that kernels read and write while they run (the sandbox's abort
//! epoch and fault word), and the host reads and writes at the same time, with no driver call
//! (see control_pool.rs for where the words live and why, as measured on the H200).
//!
//! A block has two windows of [`CONTROL_BYTES`]: the host window at its device pointer (words
//! the host writes and kernels read: the epoch) and the device window [`DEVICE_WINDOW`] bytes
//! further on (words kernels write and the host reads: the fault word). Kernels must not write
//! the host window. The host window's page also holds [`START_COUNTERS`] counters that kernels
//! add to on the device (their launches' starts) and the host seldom reads; the device
//! window's, a time word per counter that the host reads freely.

use std::sync::Arc;

use crate::buffer::DeviceBuffer;
pub use crate::control_pool::{
    CONTROL_BYTES, DEVICE_WINDOW, START_COUNTER_OFFSET, START_COUNTERS, START_TIME_OFFSET,
};
use crate::control_pool::{ControlPool, Slot};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::stats::Counters;

/// A guest's control block; clones share it. Its memory goes back to the host's pool when the
/// last clone and the last [`ControlBlock::anchor`] (and so every launch given one) are gone.
#[derive(Clone)]
pub struct ControlBlock {
    shared: Arc<ControlShared>,
}

impl std::fmt::Debug for ControlBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlBlock")
            .field("device_ptr", &format_args!("{:#x}", self.device_ptr()))
            .field("generation", &self.generation())
            .finish()
    }
}

struct ControlShared {
    slot: Arc<Slot>,
    /// A buffer over both windows (it knows the block's host and generation): its clones are
    /// the anchors launches hold.
    device: DeviceBuffer,
}

impl ControlShared {
    fn host(&self) -> &Host {
        &self.device.inner.host
    }
}

impl Host {
    /// A zeroed control block, in memory that lives as long as the host (never freed by a
    /// context reset), reached by kernels of the current context generation.
    pub fn control_block(self: &Arc<Self>) -> Result<ControlBlock> {
        self.fresh(|| ControlBlock::create(self))
    }

    fn control_pool(&self) -> Result<Arc<ControlPool>> {
        let mut pool = self
            .control
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = pool.as_ref() {
            return Ok(Arc::clone(p));
        }
        let p = Arc::new(ControlPool::new(self.dev)?);
        *pool = Some(Arc::clone(&p));
        Ok(p)
    }
}

impl ControlBlock {
    fn create(host: &Arc<Host>) -> Result<ControlBlock> {
        let generation = host.enter()?;
        let pool = host.control_pool()?;
        let slot = pool.take()?;
        let device = DeviceBuffer::from_control(host, generation, pool, Arc::clone(&slot));
        Counters::inc(&host.counters.live_control_blocks);
        Ok(ControlBlock {
            shared: Arc::new(ControlShared { slot, device }),
        })
    }

    /// The device address kernels use (the host window; the device window is
    /// [`DEVICE_WINDOW`] further).
    pub fn device_ptr(&self) -> u64 {
        self.shared.slot.addr()
    }

    /// The context generation it was made in.
    pub fn generation(&self) -> u64 {
        self.shared.device.generation()
    }

    /// The block's generation must still be the host's: kernels of a dead one are gone, and
    /// nothing the block says about them matters. Checked without a driver call (the last
    /// generation the host has seen), since a call could wait behind the very kernel a store is
    /// meant to stop.
    fn live(&self) -> Result<()> {
        let now = self.shared.host().generation();
        if now != self.generation() {
            return Err(Error::ContextLost { generation: now });
        }
        Ok(())
    }

    /// The u32 at `offset` (in the host window, or [`DEVICE_WINDOW`] + an offset in the device
    /// window) as kernels see it now.
    ///
    /// # Panics
    /// If `offset` is not a multiple of 4 inside either window (a programming error).
    pub fn try_load_u32(&self, offset: usize) -> Result<u32> {
        self.live()?;
        Ok(self.shared.slot.load(offset))
    }

    /// Stores `v` at `offset` where running kernels see it.
    ///
    /// # Panics
    /// As [`ControlBlock::try_load_u32`].
    pub fn try_store_u32(&self, offset: usize, v: u32) -> Result<()> {
        self.live()?;
        self.shared.slot.store(offset, v);
        Ok(())
    }

    /// [`ControlBlock::try_load_u32`], reading 0 when the block's context generation is gone,
    /// and with it every kernel that could have written the block (counted in the host's
    /// `drop_errors` and logged).
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.try_load_u32(offset).unwrap_or_else(|e| {
            self.shared.host().drop_error("reading a control block", &e);
            0
        })
    }

    /// [`ControlBlock::try_store_u32`], ignoring a failure for the same reason as
    /// [`ControlBlock::load_u32`]: no kernel is left to see the word.
    pub fn store_u32(&self, offset: usize, v: u32) {
        if let Err(e) = self.try_store_u32(offset, v) {
            self.shared.host().drop_error("writing a control block", &e);
        }
    }

    /// Notes `n` launches just issued whose kernels count their start in counter `i`
    /// ([`START_COUNTER_OFFSET`]); returns the count the counter had once every launch issued
    /// on it before them had started. Counts live as long as the block's memory, across the
    /// guests a pool lends it to, since the counters themselves are never cleared.
    ///
    /// # Panics
    /// If `i` is not below [`START_COUNTERS`] (a programming error).
    pub fn issue_starts(&self, i: usize, n: u32) -> u32 {
        self.shared.slot.issue(i, n)
    }

    /// Start counter `i` as kernels left it: how many launches on it have started, given the
    /// counts of [`ControlBlock::issue_starts`]. A CPU load of a page kept on the device, which
    /// moves it to the host, so the next kernel to poll the block waits for it to come back
    /// (as after a store of the epoch): for a rare check, such as whether a launch past its
    /// time limit ever began. Fails when the block's context generation is gone.
    ///
    /// # Panics
    /// As [`ControlBlock::issue_starts`].
    pub fn load_starts(&self, i: usize) -> Result<u32> {
        self.live()?;
        Ok(self.shared.slot.started(i))
    }

    /// The time word of start counter `i` ([`START_TIME_OFFSET`]): a value each launch on the
    /// counter stores as it begins (kernels store the GPU's clock), so a change says that one
    /// began since the last read. Host memory: a read costs nothing on the device. Fails when
    /// the block's context generation is gone.
    ///
    /// # Panics
    /// As [`ControlBlock::issue_starts`].
    pub fn started_at(&self, i: usize) -> Result<u64> {
        self.live()?;
        Ok(self.shared.slot.started_at(i))
    }

    /// Makes the block ready for another guest when this is its only handle and no anchor
    /// (so no launch given one) is left: both windows zeroed, as a new block's are, so no epoch
    /// or fault word of the last guest reaches the next. CPU stores of the words that are not
    /// zero already (no driver call). Returns false, changing nothing, while anything else holds
    /// it.
    pub fn reset_for_reuse(&mut self) -> Result<bool> {
        if self.is_held() {
            return Ok(false);
        }
        self.live()?;
        self.shared.slot.clear();
        Ok(true)
    }

    /// Whether anything but this handle holds the block: another clone, or an anchor (so a
    /// launch given one).
    pub fn is_held(&self) -> bool {
        let s = &self.shared;
        Arc::strong_count(s) != 1 || Arc::strong_count(&s.device.inner) != 1
    }

    /// A buffer over the block at [`ControlBlock::device_ptr`] (both windows): pass it as
    /// `Arg::Buffer(&anchor, 0)` for the kernel parameter that receives the control block, so
    /// the block outlives every launch given it.
    pub fn anchor(&self) -> DeviceBuffer {
        self.shared.device.clone()
    }
}

impl Drop for ControlShared {
    fn drop(&mut self) {
        Counters::dec(&self.host().counters.live_control_blocks);
    }
}
