//! Plain-old-data element types that may be copied to and from device memory byte for byte.

/// A type with no padding, no invalid bit patterns and no pointers, so a slice of it may be
/// viewed as bytes and rebuilt from any bytes of the right length.
///
/// # Safety
/// Implementors must be `Copy`, contain no padding bytes, and accept every bit pattern.
pub unsafe trait Pod: Copy + Default + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: primitive numbers have no padding and every bit pattern is a valid value.
        unsafe impl Pod for $t {}
    )*};
}
pod!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// Views a slice of plain-old-data as its bytes.
pub(crate) fn as_bytes<T: Pod>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so every byte of the slice is initialized; the length is
    // the slice's size in bytes and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Rebuilds elements from bytes; a trailing partial element is ignored.
pub(crate) fn from_bytes<T: Pod>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    let mut out = vec![T::default(); bytes.len() / size];
    let len = out.len() * size;
    // SAFETY: `out` owns `len` bytes of `T` storage; `T: Pod` accepts any bit pattern, and the
    // source and destination do not overlap (one is a fresh Vec).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), len);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_keeps_values() {
        let v = [1.5f32, -2.0, 3.25];
        let b = as_bytes(&v);
        assert_eq!(b.len(), 12);
        assert_eq!(from_bytes::<f32>(b), v);
    }

    #[test]
    fn trailing_partial_element_is_dropped() {
        assert_eq!(from_bytes::<u32>(&[1, 0, 0, 0, 9]), vec![1u32]);
    }
}
