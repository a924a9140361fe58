//! Locked memory counted per guest: [`LockedTally`], the bytes locked across every memory a
//! guest uses, which [`Limits::max_locked_memory_bytes`](crate::Limits) bounds.
//!
//! Why per guest and not per memory: a component may hold many core modules, each with a linear
//! memory of its own (wasmtime's StoreLimits allow thousands), so a limit per memory lets one
//! guest lock its limit in each, up to its creator's whole budget, and leave every other guest's
//! writes staged.
//!
//! When a memory joins a guest's tally: `MemoryCreator::new_memory` is not told the Store it makes
//! a memory for, so [`Runtime::run`](crate::Runtime::run) tells it, through this thread, while it
//! polls the guest's instantiation ([`made_for`]): a memory made then is counted from the start,
//! with the pieces it comes with when it is reused from the pool, and the pool hands the guest no
//! memory whose pieces would take it past its limit (nor one locked for another device). Without
//! that, a component of many memories would take as many locked memories from the pool, pinning
//! what earlier guests locked (up to the creator's budget) where only it can use it. A memory made
//! outside such a scope (an embedder's own Store) joins at its first write that may go direct
//! ([`direct_parts`](super::direct_parts) is given the tally of the guest whose write it is). The
//! tally goes with the guest's Store: a pooled memory carries only its pieces, which the next
//! guest's tally counts afresh.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use super::Slot;

/// The locked memory of one guest (one Store) across its memories. Each memory is counted once,
/// with its locked bytes as of when it joined or the guest's last direct write from it since: a
/// memory's pieces are only added to while a guest uses it, and only by that guest's writes,
/// which update its count.
#[derive(Default)]
pub(crate) struct LockedTally {
    /// Each memory counted and its locked bytes. Weak: the tally keeps no memory mapped, and a
    /// memory's handle compares by address without its slot ever being reused for another
    /// memory while the handle lives.
    memories: Vec<(Weak<Slot>, usize)>,
}

impl LockedTally {
    /// Bytes locked across the guest's counted memories.
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

/// A guest's tally, shared by its context (for its writes) and, while it is instantiated, by the
/// memories made for it.
pub(crate) type SharedTally = Arc<Mutex<LockedTally>>;

/// The tally in `t`, whatever a panic left it in (counts only ever grow to what is locked).
pub(crate) fn lock(t: &SharedTally) -> MutexGuard<'_, LockedTally> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// The guest a memory is made for ([`made_for`]).
#[derive(Clone)]
pub(super) struct Guest {
    pub(super) tally: SharedTally,
    /// Its limit in bytes.
    pub(super) limit: usize,
    /// The device its writes go to: a memory's pieces are locked with one device's context.
    pub(super) device: usize,
}

thread_local! {
    /// The guest whose memories this thread makes now ([`made_for`]).
    static MAKING_FOR: RefCell<Option<Guest>> = const { RefCell::new(None) };
}

/// The guest a memory made now on this thread is for, if a [`made_for`] is being polled here.
pub(super) fn making_for() -> Option<Guest> {
    // None too on a thread tearing down its locals: no scope is polled there.
    MAKING_FOR.try_with(|m| m.borrow().clone()).ok().flatten()
}

/// `instantiation` (a guest's, whose writes go to `device`), such that every memory made while it
/// is polled is counted in `guest`'s tally from the start, within `max_locked` (see the module
/// header), and comes with no pieces locked for another device.
pub(crate) fn made_for<F: Future>(
    guest: SharedTally,
    max_locked: u64,
    device: usize,
    instantiation: F,
) -> MadeFor<F> {
    MadeFor {
        guest: Guest {
            tally: guest,
            limit: usize::try_from(max_locked).unwrap_or(usize::MAX),
            device,
        },
        fut: Box::pin(instantiation),
    }
}

/// What [`made_for`] returns.
pub(crate) struct MadeFor<F> {
    guest: Guest,
    fut: Pin<Box<F>>,
}

/// Puts back the guest an enclosing scope made memories for, however the poll ends.
struct Restore(Option<Guest>);

impl Drop for Restore {
    fn drop(&mut self) {
        let outer = self.0.take();
        // Ignored on a thread tearing down its locals: nothing makes memories there after.
        let _ = MAKING_FOR.try_with(|m| *m.borrow_mut() = outer);
    }
}

impl<F: Future> Future for MadeFor<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Set for this poll only: the task may move to another thread before the next, and this
        // thread goes on to poll other guests' tasks.
        let this = &mut *self;
        let outer = MAKING_FOR.try_with(|m| m.replace(Some(this.guest.clone())));
        let _restore = Restore(outer.ok().flatten());
        this.fut.as_mut().poll(cx)
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
