//! [`Str`], the syntax tree's name or word: a piece of the source text, or a string a pass
//! made, in 16 bytes. `Cow<str>` took 24, and the tree holds one per name, guard, opcode,
//! modifier and operand, so an instruction took 336 bytes where this makes it 256, and
//! statements are moved and cloned by the thousand per module (loop versioning rebuilds
//! bodies; issue #9's profile put memcpy at 6% of the rewrite).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// Set in [`Str`]'s length word when the bytes are its own allocation (a `Box<str>`): a
/// `str`'s length never reaches it (it is at most `isize::MAX`).
const OWNED: usize = 1 << (usize::BITS - 1);

/// A name or word of the tree: borrowed from the source text as parsed, owned when a pass
/// makes it (a renamed symbol, a register the sandbox adds). Either way it reads as a `&str`.
pub(crate) struct Str<'a> {
    ptr: NonNull<u8>,
    /// The length in bytes, with [`OWNED`] set when `ptr` is a `Box<str>` this value frees.
    tagged: usize,
    /// Covariant in `'a`, as `&'a str` is: a tree may be looked at for a shorter lifetime.
    text: PhantomData<&'a str>,
}

// SAFETY: a `Str` is a `&str` or a `Box<str>` it alone holds; both may be sent and shared
// between threads.
unsafe impl Send for Str<'_> {}
// SAFETY: as for `Send`: shared, it only ever gives out `&str`.
unsafe impl Sync for Str<'_> {}

impl<'a> Str<'a> {
    /// A piece of text that outlives the value.
    #[inline]
    pub(crate) const fn borrowed(s: &'a str) -> Self {
        Str {
            // SAFETY: a reference is never null.
            ptr: unsafe { NonNull::new_unchecked(s.as_ptr().cast_mut()) },
            tagged: s.len(),
            text: PhantomData,
        }
    }

    /// A string made by a pass, held as an exact-size `Box<str>` (most are made at their
    /// length, so the conversion keeps the allocation). An empty one allocates nothing.
    pub(crate) fn owned(s: String) -> Self {
        if s.is_empty() {
            return Str::borrowed("");
        }
        let b: Box<str> = s.into_boxed_str();
        let len = b.len();
        let raw = Box::into_raw(b);
        Str {
            // SAFETY: `Box::into_raw` never gives null.
            ptr: unsafe { NonNull::new_unchecked(raw.cast::<u8>()) },
            tagged: len | OWNED,
            text: PhantomData,
        }
    }

    /// Whether this value frees an allocation when dropped.
    #[inline]
    pub(crate) fn is_owned(&self) -> bool {
        self.tagged & OWNED != 0
    }

    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: `ptr` and the length come from a `&'a str` that outlives `self`, or from a
        // `Box<str>` that `self` holds until it is dropped: valid UTF-8 for as long as the
        // returned borrow of `self`.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.ptr.as_ptr(),
                self.tagged & !OWNED,
            ))
        }
    }

    /// The text as a `String` (what `Cow::into_owned` gave).
    pub(crate) fn into_owned(self) -> String {
        self.as_str().to_owned()
    }
}

impl Drop for Str<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.is_owned() {
            let len = self.tagged & !OWNED;
            let raw = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), len) as *mut str;
            // SAFETY: an owned value's `ptr` and length are those `Box::into_raw` gave in
            // `owned`, and no other value holds them (`clone` copies the bytes).
            drop(unsafe { Box::from_raw(raw) });
        }
    }
}

impl Clone for Str<'_> {
    #[inline]
    fn clone(&self) -> Self {
        if self.is_owned() {
            Str::owned(self.as_str().to_owned())
        } else {
            Str {
                ptr: self.ptr,
                tagged: self.tagged,
                text: PhantomData,
            }
        }
    }
}

impl Default for Str<'_> {
    fn default() -> Self {
        Str::borrowed("")
    }
}

impl Deref for Str<'_> {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str<'_> {
    #[inline]
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Str<'_> {
    #[inline]
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl<'a> From<&'a str> for Str<'a> {
    #[inline]
    fn from(s: &'a str) -> Self {
        Str::borrowed(s)
    }
}

impl From<String> for Str<'_> {
    fn from(s: String) -> Self {
        Str::owned(s)
    }
}

impl PartialEq for Str<'_> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Str<'_> {}

impl PartialEq<str> for Str<'_> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Str<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Str<'_> {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Str<'_>> for &str {
    fn eq(&self, other: &Str<'_>) -> bool {
        *self == other.as_str()
    }
}

impl Hash for Str<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::Str;

    #[test]
    fn reads_clones_and_frees_both_kinds() {
        let text = String::from("%r1");
        let b = Str::borrowed(&text);
        let o = Str::owned(format!("{}x", "%rd"));
        let e = Str::owned(String::with_capacity(8));
        assert_eq!((&*b, &*o, &*e), ("%r1", "%rdx", ""));
        assert!(!b.is_owned() && o.is_owned() && !e.is_owned());
        let (b2, o2) = (b.clone(), o.clone());
        assert_eq!((b2, o2.is_owned()), (b, true));
        assert_ne!(o2.as_ptr(), o.as_ptr());
        assert_eq!(o.into_owned(), "%rdx");
        assert_eq!(std::mem::size_of::<Str>(), 16);
        assert_eq!(std::mem::size_of::<Option<Str>>(), 16);
    }
}
