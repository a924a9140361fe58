//! Locked memory counted per guest: [`LockedTally`], the bytes locked across every memory a
//! guest's writes went direct from, which [`Limits::max_locked_memory_bytes`](crate::Limits)
//! bounds.
//!
//! Why per guest and not per memory: a component may hold many core modules, each with a linear
//! memory of its own (wasmtime's StoreLimits allow thousands), so a limit per memory lets one
//! guest lock its limit in each, up to its creator's whole budget, and leave every other guest's
//! writes staged.
//!
//! Why counted at a write rather than when the memory is made: `MemoryCreator::new_memory` is
//! not told the Store it makes a memory for. A memory becomes the guest's to count at its first
//! write that may go direct ([`direct_parts`](super::direct_parts) is given the tally of the
//! guest whose write it is); a memory reused from the pool is counted with the pieces it came
//! with, as the limit's doc says. The tally lives in the guest's context and goes with its Store,
//! so nothing of it outlives the guest: a pooled memory carries only its pieces, which the next
//! guest's tally counts afresh. What this leaves open (pooled memories a guest holds but never
//! writes from are not counted, though their pieces stay locked meanwhile): docs/ISOLATION.md,
//! "Not covered".

use std::sync::{Arc, Weak};

use super::Slot;

/// The locked memory of one guest (one Store) across its memories. Each memory is counted once,
/// with its locked bytes as of the guest's last direct write from it: a memory's pieces are only
/// added to while a guest uses it, and only by that guest's writes, which update its count.
#[derive(Default)]
pub(crate) struct LockedTally {
    /// Each memory counted and its locked bytes. Weak: the tally keeps no memory mapped, and a
    /// memory's handle compares by address without its slot ever being reused for another
    /// memory while the handle lives.
    memories: Vec<(Weak<Slot>, usize)>,
}

impl LockedTally {
    /// Bytes locked across the guest's counted memories.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.memories.iter().map(|(_, b)| b).sum()
    }

    /// Bytes locked across the guest's counted memories other than `slot`.
    pub(super) fn besides(&self, slot: &Arc<Slot>) -> usize {
        self.memories
            .iter()
            .filter(|(s, _)| !std::ptr::eq(s.as_ptr(), Arc::as_ptr(slot)))
            .map(|(_, b)| b)
            .sum()
    }

    /// Counts `slot` as the guest's with `bytes` locked, in place of what it counted before.
    pub(super) fn count(&mut self, slot: &Arc<Slot>, bytes: usize) {
        match self
            .memories
            .iter_mut()
            .find(|(s, _)| std::ptr::eq(s.as_ptr(), Arc::as_ptr(slot)))
        {
            Some((_, counted)) => *counted = bytes,
            None => self.memories.push((Arc::downgrade(slot), bytes)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::GuestMemoryCreator;
    use super::super::tests::creator_memory;
    use super::*;

    #[test]
    fn a_memory_counted_again_replaces_its_count_and_others_add_up() {
        let c = GuestMemoryCreator::default();
        let memories = [creator_memory(&c, 1 << 16), creator_memory(&c, 1 << 16)];
        let [a, b] = memories.map(|m| super::super::slot_of(m.as_ptr() as usize).unwrap());
        let mut t = LockedTally::default();
        t.count(&a, 16);
        t.count(&a, 32);
        assert_eq!((t.bytes(), t.besides(&a), t.besides(&b)), (32, 0, 32));
        t.count(&b, 48);
        assert_eq!((t.bytes(), t.besides(&a), t.besides(&b)), (80, 48, 32));
        assert_eq!(t.memories.len(), 2, "each memory once");
    }
}
