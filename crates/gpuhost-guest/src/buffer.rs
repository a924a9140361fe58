//! A typed view of a device buffer: a length in elements of `T` over a byte-sized [`Buffer`].

use std::marker::PhantomData;

use crate::pod::{Pod, as_bytes, from_bytes};
use crate::{Arg, Buffer, BufferArg, Result, Stream};

/// `len` elements of `T` in device memory. Dropping it frees the allocation (once every launch
/// using it has ended, the host guarantees).
pub struct DeviceBuffer<T: Pod> {
    raw: Buffer,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    const SIZE: u64 = std::mem::size_of::<T>() as u64;

    /// Allocates room for `len` elements, zero-filled.
    pub fn zeroed(len: usize) -> Result<Self> {
        let bytes = len as u64 * Self::SIZE;
        let raw = Buffer::create(bytes)?;
        raw.fill(0, bytes, 0)?;
        Ok(Self {
            raw,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates a buffer holding a copy of `data`.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        let raw = Buffer::create(std::mem::size_of_val(data) as u64)?;
        raw.write(0, as_bytes(data))?;
        Ok(Self {
            raw,
            len: data.len(),
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Overwrites elements from index `at` with `data`.
    pub fn upload(&self, at: usize, data: &[T]) -> Result<()> {
        self.raw.write(at as u64 * Self::SIZE, as_bytes(data))
    }

    /// Copies every element back (synchronize the stream that wrote it first).
    pub fn download(&self) -> Result<Vec<T>> {
        self.download_range(0, self.len)
    }

    /// Copies `count` elements from index `at` back.
    pub fn download_range(&self, at: usize, count: usize) -> Result<Vec<T>> {
        let bytes = self
            .raw
            .read(at as u64 * Self::SIZE, count as u64 * Self::SIZE)?;
        Ok(from_bytes(&bytes))
    }

    /// Waits for `stream`'s launches, then copies every element back: [`Stream::synchronize`]
    /// and [`DeviceBuffer::download`] in one host call, the guest suspended once for both.
    pub fn download_after(&self, stream: &Stream) -> Result<Vec<T>> {
        self.download_range_after(stream, 0, self.len)
    }

    /// Waits for `stream`'s launches, then copies `count` elements from index `at` back (see
    /// [`DeviceBuffer::download_after`]).
    pub fn download_range_after(&self, stream: &Stream, at: usize, count: usize) -> Result<Vec<T>> {
        let bytes =
            stream.read_after(&self.raw, at as u64 * Self::SIZE, count as u64 * Self::SIZE)?;
        Ok(from_bytes(&bytes))
    }

    /// The untyped buffer, for the raw API.
    pub fn raw(&self) -> &Buffer {
        &self.raw
    }

    /// A kernel argument pointing at element `at`.
    #[inline]
    pub fn arg_at(&self, at: usize) -> Arg<'_> {
        Arg::Buffer(BufferArg {
            buffer: &self.raw,
            offset: at as u64 * Self::SIZE,
        })
    }
}
