//! [`Buffer::read_into`]: a device-to-guest read through `buffer.read-stream`, whose bytes the
//! host copies straight into the spare capacity of the caller's `Vec` (the memory each read of
//! the stream hands over), with no list result for the runtime to copy a second time.
//!
//! The wait is `reading.wait`, never the stream: a guest's `run` (and an HTTP handler) is not an
//! `async` export, and such a task may not block on a stream (wasmtime traps it). So each read
//! follows a `reading.wait`, which suspends the guest until bytes have landed on the host and
//! says how many; the read, polled once, then returns them at once.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use wit_bindgen::StreamResult;

use crate::{Buffer, Error, Result};

impl Buffer {
    /// Appends `len` bytes from byte `offset` of the buffer to `out` (as [`Buffer::read`]
    /// returns them), read through a stream into `out`'s own memory. Synchronize the stream
    /// whose launches write the buffer first.
    pub fn read_into(&self, offset: u64, len: u64, out: &mut Vec<u8>) -> Result<()> {
        let want = usize::try_from(len).map_err(|_| {
            Error::OutOfMemory(format!("{len} bytes do not fit this guest's address space"))
        })?;
        let (reading, mut bytes) = self.read_stream(offset, len)?;
        out.try_reserve_exact(want)
            .map_err(|e| Error::OutOfMemory(format!("{want} bytes for the read: {e}")))?;
        let end = out.len() + want;
        while out.len() < end && reading.wait()? > 0 {
            let mut read = pin!(bytes.read(std::mem::take(out)));
            let polled = read.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            let Poll::Ready((result, buf)) = polled else {
                // reading.wait said bytes were there: the host answers such a read at once.
                return Err(Error::NotSupported(
                    "the host left a buffer.read-stream read pending; use Buffer::read".into(),
                ));
            };
            *out = buf;
            if let StreamResult::Dropped | StreamResult::Cancelled = result {
                break;
            }
        }
        if out.len() < end {
            // The read failed on the host: `wait` returns why.
            reading.wait()?;
            return Err(Error::Driver(format!(
                "the read ended after {} of {want} bytes; read again",
                want - (end - out.len())
            )));
        }
        Ok(())
    }

    /// `len` bytes from byte `offset`, as [`Buffer::read`] returns them, read with
    /// [`Buffer::read_into`].
    pub fn read_to_vec(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_into(offset, len, &mut out)?;
        Ok(out)
    }
}
