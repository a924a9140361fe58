//! Device memory: a cheaply cloneable handle, freed when the last clone and every launch using it end.
//!
//! A buffer is either its own allocation (stream-ordered, so freeing it never waits for the
//! device, see device_alloc.rs; kept for reuse by the host's allocation cache when it goes, see
//! alloc_cache.rs), a range of an [`Arena`] (given back to the arena
//! instead of freed, and keeping the arena alive), or a [`ControlBlock`]'s windows (given back to
//! the host's control pool). All three behave the same for launches and transfers.
//!
//! [`ControlBlock`]: crate::ControlBlock

use std::ptr;
use std::sync::{Arc, Weak};

use cudarc::driver::sys::CUdeviceptr;

use crate::arena::Arena;
use crate::control_pool::{ControlPool, Slot};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::result;
use crate::stats::Counters;

/// How many of the most recently kept handles [`keep_once`] looks through: a bound on its work,
/// not on duplicates (a burst relaunching on the same few buffers finds them there).
const RECENT_KEPT: usize = 8;

/// Keeps a handle on `b` in `kept` unless one of the last few kept already is `b`: what keeps a
/// batch's or a graph's buffers alive, with no clone (an atomic increment) for a repeat.
/// (A `Vec`, or a batch's inline list: completion/.)
#[inline]
pub(crate) fn keep_once<K>(kept: &mut K, b: &DeviceBuffer)
where
    K: AsRef<[DeviceBuffer]> + Extend<DeviceBuffer>,
{
    if !recent(kept.as_ref()).iter().rev().any(|k| k.same(b)) {
        kept.extend(Some(b.clone()));
    }
}

/// The last few handles of `kept`, as [`keep_once`] looks through them: a slice, not a
/// `take` of a reversed iterator, which cost each launch's look about half again as much.
#[inline]
fn recent(kept: &[DeviceBuffer]) -> &[DeviceBuffer] {
    &kept[kept.len().saturating_sub(RECENT_KEPT)..]
}

/// [`keep_once`] for a handle given away: kept, or dropped when one of the last few kept is
/// the same buffer.
pub(crate) fn keep_owned<K>(kept: &mut K, b: DeviceBuffer)
where
    K: AsRef<[DeviceBuffer]> + Extend<DeviceBuffer>,
{
    if !recent(kept.as_ref()).iter().rev().any(|k| k.same(&b)) {
        kept.extend(Some(b));
    }
}

/// Whether one of the last few handles of `kept` (as [`keep_once`] looks) is `w`'s buffer.
pub(crate) fn recently_kept(kept: &[DeviceBuffer], w: &WeakBuffer) -> bool {
    recent(kept).iter().rev().any(|k| w.is(k))
}

/// A device allocation of one host and one context generation.
#[derive(Clone)]
pub struct DeviceBuffer {
    pub(crate) inner: Arc<BufferInner>,
}

/// A handle on a buffer that does not keep its memory: the buffer is freed when its last
/// [`DeviceBuffer`] goes, whatever weak handles remain. What a cached graph keeps of the
/// buffers it last ran (graph.rs): it may replay them only while [`WeakBuffer::upgrade`] gives
/// them back.
#[derive(Clone)]
pub struct WeakBuffer {
    inner: Weak<BufferInner>,
}

impl WeakBuffer {
    /// The buffer, while some handle keeps it; None once it was freed.
    #[inline]
    pub fn upgrade(&self) -> Option<DeviceBuffer> {
        self.inner.upgrade().map(|inner| DeviceBuffer { inner })
    }

    /// Whether `b` is the buffer this handle was made from. Exact even after that buffer was
    /// freed: a weak handle keeps the handle's own allocation, so no other buffer's can take
    /// its address.
    #[inline]
    pub fn is(&self, b: &DeviceBuffer) -> bool {
        ptr::eq(self.inner.as_ptr(), Arc::as_ptr(&b.inner))
    }
}

pub(crate) struct BufferInner {
    pub(crate) host: Arc<Host>,
    pub(crate) raw: CUdeviceptr,
    len: usize,
    pub(crate) generation: u64,
    origin: Origin,
}

/// Where a buffer's memory comes from, and so what its last drop does.
enum Origin {
    /// Its own allocation of `size` bytes (device_alloc.rs): kept by the host's cache, or freed.
    Alloc { size: usize },
    /// `size` bytes at `offset` of an arena (`size` 0 for the arena's anchor): given back.
    Arena {
        arena: Arc<Arena>,
        offset: u64,
        size: u64,
    },
    /// A control block's slot: given back to the pool (no driver call; the memory outlives
    /// every context generation).
    Control {
        pool: Arc<ControlPool>,
        slot: Arc<Slot>,
    },
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.inner.host.ordinal())
            .field("len", &self.inner.len)
            .field("generation", &self.inner.generation)
            .finish()
    }
}

impl DeviceBuffer {
    pub(crate) fn alloc(host: &Arc<Host>, bytes: usize) -> Result<Self> {
        let generation = host.enter()?;
        // Never 0: cuMemAlloc rejects 0 bytes, and a 1-byte allocation keeps empty buffers
        // valid handles.
        let size = host.alloc_cache.alloc_size(bytes);
        let raw = match host.alloc_cache.take(size, generation) {
            Some(raw) => raw,
            None => host.device_alloc.alloc(host, size, generation)?,
        };
        Counters::inc(&host.counters.live_buffers);
        Ok(Self {
            inner: Arc::new(BufferInner {
                host: host.clone(),
                raw,
                len: bytes,
                generation,
                origin: Origin::Alloc { size },
            }),
        })
    }

    /// A buffer over `len` bytes at `offset` of `arena`, which the arena has handed out (zeroed)
    /// as a `size`-byte range; the range goes back to the arena when the last holder drops.
    pub(crate) fn from_arena(arena: &Arc<Arena>, offset: u64, size: u64, len: usize) -> Self {
        let host = Arc::clone(arena.host());
        Counters::inc(&host.counters.live_buffers);
        Self {
            inner: Arc::new(BufferInner {
                raw: arena.base() + offset,
                len,
                generation: arena.generation(),
                host,
                origin: Origin::Arena {
                    arena: Arc::clone(arena),
                    offset,
                    size,
                },
            }),
        }
    }

    /// A buffer over control block `slot` (both windows), taken from `pool` in `generation`.
    pub(crate) fn from_control(
        host: &Arc<Host>,
        generation: u64,
        pool: Arc<ControlPool>,
        slot: Arc<Slot>,
    ) -> Self {
        Counters::inc(&host.counters.live_buffers);
        Self {
            inner: Arc::new(BufferInner {
                host: Arc::clone(host),
                raw: slot.addr(),
                len: crate::control::DEVICE_WINDOW + crate::control::CONTROL_BYTES,
                generation,
                origin: Origin::Control { pool, slot },
            }),
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The context generation this buffer belongs to.
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }

    /// The device this buffer lives on.
    pub fn device(&self) -> usize {
        self.inner.host.ordinal()
    }

    /// Whether `other` is a handle on this very allocation (not only the same address: a
    /// zero-length anchor shares its address with the buffer at its base).
    #[inline]
    pub fn same(&self, other: &DeviceBuffer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A handle on this buffer that does not keep it alive (see [`WeakBuffer`]).
    #[inline]
    pub fn downgrade(&self) -> WeakBuffer {
        WeakBuffer {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// The raw device address (for interop; valid while this handle lives and the generation is current).
    pub fn device_ptr(&self) -> u64 {
        self.inner.raw
    }

    pub(crate) fn range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(()),
            _ => Err(Error::OutOfBounds {
                offset,
                len,
                size: self.inner.len,
            }),
        }
    }

    fn enter(&self) -> Result<()> {
        self.inner.host.enter_for(self.inner.generation).map(|_| ())
    }

    /// Copy `data` to the buffer at `offset` (synchronous).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.range(offset, data.len())?;
        self.enter()?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the range lies inside the allocation (checked above); data is readable for its length.
        let r = unsafe { result::mem::copy_htod(self.inner.raw + offset as u64, data) };
        self.inner.host.check(r)
    }

    /// Copy from the buffer at `offset` into `out` (synchronous).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.range(offset, out.len())?;
        self.enter()?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: the range lies inside the allocation; out is writable for its length.
        let r = unsafe { result::mem::copy_dtoh(out, self.inner.raw + offset as u64) };
        self.inner.host.check(r)
    }

    /// Set `len` bytes at `offset` to `value`; done when it returns.
    pub fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.range(offset, len)?;
        self.enter()?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range lies inside the allocation.
        let r = unsafe { result::mem::set_d8(self.inner.raw + offset as u64, value, len) };
        self.inner.host.check(r)?;
        // cuMemsetD8 on device memory returns before it runs, on the legacy stream, which
        // gpuhost's non-blocking streams do not wait for: a launch right after could run first
        // and have its output overwritten (seen on the H200 in the swap test).
        // SAFETY: the legacy default stream of the bound context.
        let r = unsafe { result::stream::synchronize(std::ptr::null_mut()) };
        self.inner.host.check(r)
    }

    /// Copy `len` bytes from `src` at `src_offset` to this buffer at `offset`.
    pub fn copy_from(
        &self,
        offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        if !Arc::ptr_eq(&self.inner.host, &src.inner.host) {
            return Err(Error::DeviceMismatch {
                what: "source buffer",
                expected: self.device(),
                found: src.device(),
            });
        }
        self.range(offset, len)?;
        src.range(src_offset, len)?;
        self.enter()?;
        src.enter()?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges lie inside live allocations of this context.
        let r = unsafe {
            result::mem::copy_dtod(
                self.inner.raw + offset as u64,
                src.inner.raw + src_offset as u64,
                len,
            )
        };
        self.inner.host.check(r)
    }
}

impl DeviceBuffer {
    /// A kernel is about to be launched with this buffer (see `Arena::note_kernel`).
    pub(crate) fn note_kernel(&self) {
        if let Origin::Arena { arena, .. } = &self.inner.origin {
            arena.note_kernel();
        }
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        Counters::dec(&self.host.counters.live_buffers);
        let size = match &self.origin {
            Origin::Alloc { size } => *size,
            // The arena unmaps its memory only when it goes itself (dead generations: never).
            Origin::Arena {
                arena,
                offset,
                size,
            } => return arena.give_back(*offset, *size),
            Origin::Control { pool, slot } => return pool.give(slot),
        };
        // A buffer of a dead generation died with its context; freeing it could free the new
        // context's memory at the same address.
        self.host.release_in(self.generation, "free a buffer", || {
            if self.host.alloc_cache.put(size, self.raw, self.generation) {
                return;
            }
            // The allocation is ours, of the current context, and no clone or launch uses it
            // any more (this is the last Arc); the cache did not keep it. Freed in stream order,
            // so this waits for no kernel (see device_alloc.rs).
            self.host
                .device_alloc
                .free(&self.host, self.generation, &[self.raw]);
        });
    }
}
