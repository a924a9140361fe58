//! Freed device allocations kept for reuse, so a service that allocates and frees buffers of
//! the same sizes on every request (a trusted `gpuhost serve` function, a native handler)
//! skips the driver: on the H200 a 128-byte `cuMemAlloc` took 167 µs inside a request
//! (bench/h200-runs/2026-12-01-s5/serve-phases/). (Freeing no longer waits for the device:
//! blocks come from and go back to a stream-ordered pool, see device_alloc.rs.)
//!
//! The policy, chosen to be safe before it is fast:
//! - Sizes are rounded to a class (powers of two from 512 B to 2 MiB, then multiples of 2 MiB);
//!   blocks of one class are interchangeable. A buffer keeps the length it asked for.
//! - A block comes back at the moment it would have been freed: its buffer's last holder and
//!   every launch given it are gone, so no work can still touch it. Its contents are left as
//!   they are, as the driver leaves reused memory (`Host::alloc` promises none).
//! - At most [`Host::set_alloc_cache_limit`] bytes are kept (default [`DEFAULT_LIMIT`]; 0 turns
//!   the cache off), and no block over a quarter of that, so the cache never holds much of the
//!   device.
//! - An allocation the driver refuses for lack of memory first frees every kept block and
//!   tries again: kept blocks never cause an out-of-memory that freeing them would avoid.
//! - Blocks belong to one context generation; after a loss they died with their context and
//!   are forgotten, never freed.
//!
//! [`Host::set_alloc_cache_limit`]: crate::Host::set_alloc_cache_limit

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::sys::CUdeviceptr;

/// Bytes kept at most unless the host is told otherwise.
pub const DEFAULT_LIMIT: usize = 256 << 20;
const MIN_CLASS: usize = 512;
const LARGE_STEP: usize = 2 << 20;

/// The size of the block that serves a request of `bytes` while the cache is on.
pub(crate) fn class(bytes: usize) -> usize {
    let b = bytes.max(1);
    if b <= LARGE_STEP {
        b.next_power_of_two().max(MIN_CLASS)
    } else {
        b.div_ceil(LARGE_STEP).saturating_mul(LARGE_STEP)
    }
}

/// A host's kept blocks.
pub(crate) struct AllocCache {
    limit: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The generation the kept blocks belong to.
    generation: u64,
    bytes: usize,
    free: HashMap<usize, Vec<CUdeviceptr>>,
}

impl State {
    /// Forgets blocks of an older generation (their memory went with its context).
    fn at(&mut self, generation: u64) -> &mut Self {
        if self.generation != generation {
            self.free.clear();
            self.bytes = 0;
            self.generation = generation;
        }
        self
    }
}

impl AllocCache {
    pub(crate) fn new() -> Self {
        Self {
            limit: AtomicUsize::new(DEFAULT_LIMIT),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state consistent before anything that can panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    pub(crate) fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// The size to ask the driver for when a request of `bytes` finds no kept block.
    pub(crate) fn alloc_size(&self, bytes: usize) -> usize {
        if self.limit() == 0 {
            bytes.max(1)
        } else {
            class(bytes)
        }
    }

    /// A kept block of `size` bytes (a class) of `generation`, if there is one.
    pub(crate) fn take(&self, size: usize, generation: u64) -> Option<CUdeviceptr> {
        let mut st = self.lock();
        let st = st.at(generation);
        let raw = st.free.get_mut(&size)?.pop()?;
        st.bytes -= size;
        Some(raw)
    }

    /// Keeps a block nothing uses any more; false when it does not fit (the caller frees it).
    pub(crate) fn put(&self, size: usize, raw: CUdeviceptr, generation: u64) -> bool {
        let limit = self.limit();
        if size > limit / 4 || size != class(size) {
            return false;
        }
        let mut st = self.lock();
        let st = st.at(generation);
        if st.bytes + size > limit {
            return false;
        }
        st.bytes += size;
        st.free.entry(size).or_default().push(raw);
        true
    }

    /// Every kept block of `generation`, handed to the caller to free; the cache is empty after.
    pub(crate) fn drain(&self, generation: u64) -> Vec<CUdeviceptr> {
        let mut st = self.lock();
        let st = st.at(generation);
        st.bytes = 0;
        st.free.drain().flat_map(|(_, v)| v).collect()
    }

    /// Bytes kept now.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_powers_of_two_then_to_two_mebibytes() {
        assert_eq!(class(0), 512);
        assert_eq!(class(128), 512);
        assert_eq!(class(513), 1024);
        assert_eq!(class(2 << 20), 2 << 20);
        assert_eq!(class((2 << 20) + 1), 4 << 20);
        assert_eq!(class((6 << 20) - 1), 6 << 20);
        // Saturates (the driver refuses it) rather than wrapping to a small class.
        assert_eq!(class(usize::MAX), usize::MAX);
    }

    #[test]
    fn a_block_kept_is_handed_out_once_for_its_class_and_generation_only() {
        let c = AllocCache::new();
        assert!(c.put(1024, 0x1000, 1));
        assert_eq!(c.bytes(), 1024);
        assert_eq!(c.take(512, 1), None, "another class");
        assert_eq!(c.take(1024, 1), Some(0x1000));
        assert_eq!(c.take(1024, 1), None, "handed out twice");
        assert!(c.put(1024, 0x2000, 1));
        assert_eq!(c.take(1024, 2), None, "a block of a lost generation");
        assert_eq!(c.bytes(), 0, "the lost generation's blocks are forgotten");
    }

    #[test]
    fn the_limit_bounds_what_is_kept_and_zero_turns_the_cache_off() {
        let c = AllocCache::new();
        c.set_limit(8 << 20);
        assert!(
            !c.put(4 << 20, 0x1000, 1),
            "a block over a quarter of the limit"
        );
        for i in 0..4 {
            assert!(c.put(2 << 20, 0x1000 * (i + 1), 1));
        }
        assert!(!c.put(2 << 20, 0x9000, 1), "past the limit");
        assert_eq!(c.drain(1).len(), 4);
        assert_eq!(c.bytes(), 0);
        c.set_limit(0);
        assert!(!c.put(512, 0x1000, 1));
        assert_eq!(c.alloc_size(100), 100);
    }
}
