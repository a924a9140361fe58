//! A short list kept inline, moving to the heap only past `N` elements. An instruction's
//! modifiers and operands are a few each: held in `Vec`s they cost two allocations an
//! instruction to parse and two frees to drop, the largest share of what building and freeing
//! a tree cost (issue #9's profile). Not `smallvec::SmallVec` (the workspace's, in gpuhost):
//! it is invariant over its element type, and an AST of `Str<'a>` and `Operand<'a>` in it no
//! longer shortens its lifetime where `lower/` borrows a module and its functions together (tried:
//! lower_kernel stops compiling).

use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// What a [`Small`] can hold: a type with a default that owns nothing (what unused slots
/// hold), which can tell a value that owns nothing either, so that dropping it can be skipped
/// and a list of such values copied bit for bit ([`Small`]'s `clone`).
///
/// # Safety
///
/// `owns_nothing` may answer `true` only for a value whose bitwise copy is a second valid
/// value independent of the first (it owns no allocation, and dropping either frees nothing):
/// a borrowed name, a number, an empty `String`. `false` is always correct, only slower.
pub(crate) unsafe trait Item: Default {
    /// Whether dropping `self` would free nothing (see the trait's safety contract).
    fn owns_nothing(&self) -> bool {
        false
    }
}

// SAFETY: a `usize` owns nothing; its copy is a copy.
unsafe impl Item for usize {
    fn owns_nothing(&self) -> bool {
        true
    }
}

/// Up to `N` elements inline, any number on the heap. Unused inline slots hold `T::default()`.
// The slots are never dropped as an array: `Drop` drops only the `len` in use, since dropping
// every slot cost a call per unused operand of every instruction freed (issue #9's profile).
pub(crate) enum Small<T: Item, const N: usize> {
    Inline {
        len: usize,
        items: ManuallyDrop<[T; N]>,
    },
    /// Held undropped, as the inline slots are, so that `Drop` is all a list's drop does: the
    /// glue that dropped a `Vec` variant after it was a second call per list.
    Heap(ManuallyDrop<Vec<T>>),
}

impl<T: Item, const N: usize> Drop for Small<T, N> {
    #[inline]
    fn drop(&mut self) {
        match self {
            Small::Inline { len, items } => {
                // Each element that owns something is swapped for a default and dropped; what
                // stays in the slots owns nothing (see `push`), so leaving the array undropped
                // leaks nothing. Most elements own nothing (names borrowed from the source):
                // skipped.
                for x in items.iter_mut().take(*len) {
                    if !x.owns_nothing() {
                        drop(std::mem::take(x));
                    }
                }
            }
            // Taken out (an empty `Vec` left behind allocates nothing) and dropped.
            Small::Heap(h) => drop(std::mem::take(&mut **h)),
        }
    }
}

impl<T: Item + Clone, const N: usize> Clone for Small<T, N> {
    fn clone(&self) -> Self {
        match self {
            // Nearly every list (an instruction's modifiers and operands, names borrowed from
            // the text) owns nothing: copied as it is. Cloned slot by slot, each element went
            // through the stack twice and the list through a `memcpy` (loop versioning clones
            // every instruction of a loop's fast copy).
            Small::Inline { len, items } if items[..*len].iter().all(T::owns_nothing) => {
                // SAFETY: every element in use owns nothing, and so does every unused slot (a
                // `T::default()`, see `push`): by `Item`'s contract the bitwise copy is a
                // second list of valid values that shares no allocation with this one.
                unsafe { std::ptr::read(self) }
            }
            // Only the slots in use: cloning the whole array cloned (and later dropped) every
            // unused default too.
            // Each slot made where it lies: collected, every element was pushed (a test of
            // the list's kind and room each) into a list whose slots were defaults first.
            Small::Inline { len, items } => Small::Inline {
                len: *len,
                items: ManuallyDrop::new(std::array::from_fn(|k| match items.get(k) {
                    Some(x) if k < *len => x.clone(),
                    _ => T::default(),
                })),
            },
            Small::Heap(h) => Small::Heap(h.clone()),
        }
    }
}

impl<T: Item, const N: usize> Small<T, N> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Small::Inline {
            len: 0,
            items: ManuallyDrop::new(std::array::from_fn(|_| T::default())),
        }
    }

    /// Appends `v`, moving the list to the heap when it outgrows its inline slots.
    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        if let Small::Inline { len, items } = self
            && let Some(slot) = items.get_mut(*len)
        {
            // The slot holds a `T::default()`, which owns nothing for the tree's types
            // (operands, names, indices): forgotten, not dropped, since dropping it was an
            // out-of-line call per operand parsed. Were a default ever to own memory, this
            // would leak it, never touch freed memory.
            std::mem::forget(std::mem::replace(slot, v));
            *len += 1;
            return;
        }
        self.push_past(v);
    }

    /// Appends an element left for the caller to fill in place (with [`fill`]): a value
    /// built aside and pushed went through the stack and was copied into its slot, a copy per
    /// operand parsed. The element is the slot's `T::default()` (what unused slots hold).
    #[inline]
    pub(crate) fn push_slot(&mut self) -> &mut T {
        // The free slot found first and taken in a second match: a slot returned from the
        // first would keep `self` borrowed on the path that spills.
        let free = match self {
            Small::Inline { len, .. } => (*len < N).then_some(*len),
            Small::Heap(_) => None,
        };
        match (free, self) {
            (Some(k), Small::Inline { len, items }) => {
                *len = k + 1;
                &mut items[k]
            }
            (_, s) => s.push_slot_past(),
        }
    }

    /// `push_slot` where the inline slots are full, out of line.
    #[inline(never)]
    fn push_slot_past(&mut self) -> &mut T {
        self.push_past(T::default());
        let last = self.len() - 1;
        &mut self[last]
    }

    /// `push` past the inline slots, out of line: the inline case is nearly every push, and
    /// small enough to inline where it is.
    #[inline(never)]
    fn push_past(&mut self, v: T) {
        self.spill();
        if let Small::Heap(h) = self {
            h.push(v);
        }
    }

    /// Moves the elements to the heap (where they stay), with room for three times as many
    /// again: a list that outgrows its slots is nearly always an `mma`'s modifiers (9 or 10),
    /// which room for twice `N` made grow a second time.
    #[inline(never)]
    fn spill(&mut self) {
        if let Small::Inline { len, items } = self {
            let mut heap = Vec::with_capacity(4 * N.max(1));
            heap.extend(items[..*len].iter_mut().map(std::mem::take));
            *self = Small::Heap(ManuallyDrop::new(heap));
        }
    }

    /// The elements, by value.
    pub(crate) fn into_vec(mut self) -> Vec<T> {
        match &mut self {
            Small::Inline { len, items } => {
                items.iter_mut().take(*len).map(std::mem::take).collect()
            }
            Small::Heap(h) => std::mem::take(&mut **h),
        }
    }

    /// The elements as a slice.
    pub(crate) fn as_slice(&self) -> &[T] {
        self
    }

    /// Whether the list has moved to the heap (which it then owns).
    pub(crate) fn spilled(&self) -> bool {
        matches!(self, Small::Heap(_))
    }

    /// Whether dropping the list would free nothing.
    pub(crate) fn owns_nothing(&self) -> bool {
        !self.spilled() && self.iter().all(Item::owns_nothing)
    }
}

/// Puts `v` where a default is (a slot from [`Small::push_slot`], a field made empty),
/// forgetting the default rather than dropping it: it owns nothing (see `push`), and the drop
/// was a test of its kind per slot (testing `owns_nothing` here instead cost 1% of a rewrite).
/// Given a slot that owns something, this would leak it: tests assert it never is.
#[inline]
pub(crate) fn fill<T: Item>(slot: &mut T, v: T) {
    debug_assert!(slot.owns_nothing(), "fill is for slots that own nothing");
    std::mem::forget(std::mem::replace(slot, v));
}

impl<T: Item, const N: usize> Default for Small<T, N> {
    fn default() -> Self {
        Small::new()
    }
}

impl<T: Item, const N: usize> Deref for Small<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Small::Inline { len, items } => &items[..*len],
            Small::Heap(h) => h,
        }
    }
}

impl<T: Item, const N: usize> DerefMut for Small<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Small::Inline { len, items } => &mut items[..*len],
            Small::Heap(h) => h,
        }
    }
}

impl<T: Item + fmt::Debug, const N: usize> fmt::Debug for Small<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Item + PartialEq, const N: usize> PartialEq for Small<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Item, const N: usize> FromIterator<T> for Small<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut s = Small::new();
        for v in iter {
            s.push(v);
        }
        s
    }
}

impl<T: Item, const N: usize> From<Vec<T>> for Small<T, N> {
    fn from(v: Vec<T>) -> Self {
        if v.len() > N {
            return Small::Heap(ManuallyDrop::new(v));
        }
        v.into_iter().collect()
    }
}

impl<T: Item, const N: usize, const M: usize> From<[T; M]> for Small<T, N> {
    fn from(a: [T; M]) -> Self {
        a.into_iter().collect()
    }
}

impl<'a, T: Item, const N: usize> IntoIterator for &'a Small<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: Item, const N: usize> IntoIterator for &'a mut Small<T, N> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::Small;

    // SAFETY: a `u32` owns nothing; its copy is a copy.
    unsafe impl super::Item for u32 {
        fn owns_nothing(&self) -> bool {
            true
        }
    }

    #[test]
    fn keeps_order_inline_and_past_it() {
        for n in 0..10 {
            let s: Small<u32, 4> = (0..n).collect();
            assert_eq!(s.as_slice(), (0..n).collect::<Vec<_>>().as_slice());
            assert_eq!(matches!(s, Small::Heap(_)), n > 4);
            let v: Small<u32, 4> = (0..n).collect::<Vec<_>>().into();
            assert_eq!(v, s);
            let mut f: Small<u32, 4> = Small::new();
            for x in 0..n {
                super::fill(f.push_slot(), x);
            }
            assert_eq!(f, s);
        }
    }
}
