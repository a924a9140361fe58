//! Stream-ordered copies between device buffers and pinned host buffers. Each returns once the
//! copy is enqueued; it happens in stream order.

use cudarc::driver::result;

use crate::error::{Error, Result};
use crate::memory::{DeviceBuffer, PinnedBuffer};
use crate::stream::Stream;

fn check(what: &str, src: usize, dst: usize) -> Result<()> {
    if src != dst {
        return Err(Error::BadCase {
            case: what.into(),
            detail: format!("copy between buffers of {src} and {dst} bytes"),
        });
    }
    Ok(())
}

/// `dst ← src`, device to device.
pub fn device_to_device(dst: &DeviceBuffer, src: &DeviceBuffer, stream: &Stream) -> Result<()> {
    check("cuMemcpyDtoDAsync", src.len(), dst.len())?;
    stream.bind()?;
    // SAFETY: both ranges cover whole live allocations of the stream's context; the buffers
    // outlive the copy because the caller synchronizes before dropping them (documented above).
    unsafe { result::memcpy_dtod_async(dst.raw, src.raw, src.len(), stream.raw) }
        .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))
}

/// `dst ← src`, pinned host to device.
pub fn host_to_device(dst: &DeviceBuffer, src: &PinnedBuffer, stream: &Stream) -> Result<()> {
    check("cuMemcpyHtoDAsync", src.len(), dst.len())?;
    stream.bind()?;
    // SAFETY: `src.raw` is valid for `len` bytes of pinned memory owned by `src`, and the
    // destination is a whole live allocation; the caller keeps both alive until the copy ran.
    let host = unsafe { std::slice::from_raw_parts(src.raw.cast_const(), src.len()) };
    // SAFETY: as above.
    unsafe { result::memcpy_htod_async(dst.raw, host, stream.raw) }
        .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))
}

/// `dst ← src`, device to pinned host.
pub fn device_to_host(dst: &PinnedBuffer, src: &DeviceBuffer, stream: &Stream) -> Result<()> {
    check("cuMemcpyDtoHAsync", src.len(), dst.len())?;
    stream.bind()?;
    // SAFETY: `dst.raw` is valid for `len` writable bytes owned by `dst`; nothing else writes it
    // while the copy is in flight (PinnedBuffer only reads).
    let host = unsafe { std::slice::from_raw_parts_mut(dst.raw, dst.len()) };
    // SAFETY: the source is a whole live allocation; the caller keeps both alive until it ran.
    unsafe { result::memcpy_dtoh_async(host, src.raw, stream.raw) }
        .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))
}
