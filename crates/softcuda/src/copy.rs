//! Copies and fills: cuMemcpy* and cuMemset*, synchronous (ordered on the legacy default stream,
//! returning when done) or asynchronous on a stream.
//!
//! Host memory the driver did not allocate (pageable) is handled as NVIDIA does: an async copy
//! from it is staged at call time, an async copy into it completes before the call returns.

use std::sync::Arc;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::array;
use crate::context::{self, Context};
use crate::graph::{NodeKind, TYPE_MEMSET};
use crate::graph_copy::RawMemcpy3D;
use crate::memory::{self, Span};
use crate::stream::{self, Stream};

/// A host pointer the caller owns; it is only used while the call that passed it is waiting.
struct HostPtr(*mut u8);

// SAFETY: a HostPtr is created only for copies whose submitting call waits for the copy to finish
// (see `Plan::must_wait`), so the caller's buffer outlives every use on the stream worker.
unsafe impl Send for HostPtr {}

/// One side of a copy.
enum End {
    /// Memory in the allocation table (device, managed or page-locked host).
    Mem(Span),
    /// Pageable host memory, used in place.
    Host(HostPtr),
    /// Pageable host memory copied at call time (async host-to-device).
    Staged(Vec<u8>),
}

impl End {
    fn ptr(&self) -> *mut u8 {
        match self {
            End::Mem(s) => s.ptr(),
            End::Host(h) => h.0,
            End::Staged(v) => v.as_ptr().cast_mut(),
        }
    }

    fn is_pageable(&self) -> bool {
        matches!(self, End::Host(_))
    }
}

/// A device-side range: must lie inside one allocation.
fn device(addr: u64, len: usize) -> CuResult<End> {
    Ok(End::Mem(memory::span(addr, len as u64)?))
}

/// A host-side range: page-locked memory the driver allocated is used as device-visible memory;
/// anything else is the caller's pageable memory.
fn host(ptr: *mut u8, len: usize, staged_for_async: bool) -> CuResult<End> {
    if ptr.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if let Ok(span) = memory::span(ptr as u64, len as u64) {
        return Ok(End::Mem(span));
    }
    if staged_for_async {
        // SAFETY: the caller guarantees `len` readable bytes at `ptr` for the duration of the call.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        return Ok(End::Staged(bytes.to_vec()));
    }
    Ok(End::Host(HostPtr(ptr)))
}

/// A unified-address range (cuMemcpy): whatever the table knows, else pageable host memory.
fn unified(addr: u64, len: usize, staged_for_async: bool) -> CuResult<End> {
    host(addr as *mut u8, len, staged_for_async)
}

/// Where a copy runs: `None` is the synchronous form (on the legacy stream, or the per-thread
/// default stream for a `_ptds` call).
fn target(stream: Option<u64>) -> CuResult<(Arc<Context>, Arc<Stream>)> {
    match stream {
        None => {
            let ctx = context::live()?;
            let s = stream::implicit(&ctx);
            Ok((ctx, s))
        }
        Some(h) => stream::resolve(h),
    }
}

/// Queues `job` and waits for it when the call is synchronous or touches pageable memory in place.
fn run(stream: Option<u64>, must_wait: bool, job: impl FnOnce() + Send + 'static) -> CuResult<()> {
    let (ctx, s) = target(stream)?;
    let guard_ctx = Arc::clone(&ctx);
    let ticket = ctx.submit(
        &s,
        Box::new(move || {
            // After a kernel fault nothing more runs in the context, as on a GPU.
            if guard_ctx.sticky().is_none() {
                job();
            }
        }),
    );
    if stream.is_none() || must_wait {
        s.wait_for(ticket);
        if stream.is_none() {
            // A blocking copy is one of the points where device printf output is printed.
            ctx.printf.flush();
        }
        ctx.check_usable()?;
    }
    Ok(())
}

/// When `stream` is capturing, records the call (a fill) as a graph node that repeats it on the
/// launch stream.
fn captured(
    stream: Option<u64>,
    kind: u32,
    replay: impl Fn(u64) -> CuResult<()> + Send + Sync + 'static,
) -> Option<CuResult<()>> {
    let s = stream?;
    let capture = crate::capture::active(s)?;
    Some(capture.add(s, NodeKind::Call(Arc::new(replay), kind)))
}

/// When `stream` is capturing, records the copy as a memcpy node that keeps its parameters
/// (so cuGraphMemcpyNodeGetParams and the SetParams calls take it as one built by hand) and
/// runs it on the launch stream (pageable host memory is read when the graph runs, not now).
fn captured_copy(stream: Option<u64>, copy: impl FnOnce() -> RawMemcpy3D) -> Option<CuResult<()>> {
    let s = stream?;
    let capture = crate::capture::active(s)?;
    Some(capture.add(s, NodeKind::Memcpy(copy())))
}

fn copy_ends(dst: End, src: End, len: usize, stream: Option<u64>) -> CuResult<()> {
    let must_wait = dst.is_pageable() || src.is_pageable();
    run(stream, must_wait, move || {
        // SAFETY: both ends were checked to cover `len` bytes (table spans are kept alive by
        // their blocks; host pointers are the caller's, valid until the waiting call returns).
        // `copy` tolerates overlap, as cuMemcpyDtoD on one allocation requires.
        unsafe { std::ptr::copy(src.ptr(), dst.ptr(), len) };
    })
}

/// cuMemcpy3D(Async): checked as a memcpy node is, then one 2D copy per slice (a capturing
/// stream records it as one memcpy node).
pub(crate) fn copy_3d(m: &RawMemcpy3D, stream: Option<u64>) -> CuResult<()> {
    context::live()?;
    crate::graph_copy::check(m)?;
    if let Some(r) = captured_copy(stream, || *m) {
        return r;
    }
    crate::graph_copy::run(m, stream)
}

/// cuMemcpyHtoD(Async).
pub(crate) fn htod(dst: u64, src: *const u8, len: usize, stream: Option<u64>) -> CuResult<()> {
    context::live()?;
    if len == 0 {
        return Ok(());
    }
    let copy = || RawMemcpy3D::linear((MEMORYTYPE_HOST, src as u64), (MEMORYTYPE_DEVICE, dst), len);
    if let Some(r) = captured_copy(stream, copy) {
        return r;
    }
    let dst = device(dst, len)?;
    let src = host(src.cast_mut(), len, stream.is_some())?;
    copy_ends(dst, src, len, stream)
}

/// cuMemcpyDtoH(Async).
pub(crate) fn dtoh(dst: *mut u8, src: u64, len: usize, stream: Option<u64>) -> CuResult<()> {
    context::live()?;
    if len == 0 {
        return Ok(());
    }
    let copy = || RawMemcpy3D::linear((MEMORYTYPE_DEVICE, src), (MEMORYTYPE_HOST, dst as u64), len);
    if let Some(r) = captured_copy(stream, copy) {
        return r;
    }
    let src = device(src, len)?;
    let dst = host(dst, len, false)?;
    copy_ends(dst, src, len, stream)
}

/// cuMemcpyDtoD(Async).
pub(crate) fn dtod(dst: u64, src: u64, len: usize, stream: Option<u64>) -> CuResult<()> {
    context::live()?;
    if len == 0 {
        return Ok(());
    }
    let copy = || RawMemcpy3D::linear((MEMORYTYPE_DEVICE, src), (MEMORYTYPE_DEVICE, dst), len);
    if let Some(r) = captured_copy(stream, copy) {
        return r;
    }
    let (dst, src) = (device(dst, len)?, device(src, len)?);
    copy_ends(dst, src, len, stream)
}

/// cuMemcpy(Async): either side may be device or host memory (unified addressing).
pub(crate) fn any(dst: u64, src: u64, len: usize, stream: Option<u64>) -> CuResult<()> {
    context::live()?;
    if len == 0 {
        return Ok(());
    }
    let copy = || RawMemcpy3D::linear((MEMORYTYPE_UNIFIED, src), (MEMORYTYPE_UNIFIED, dst), len);
    if let Some(r) = captured_copy(stream, copy) {
        return r;
    }
    let src = unified(src, len, stream.is_some())?;
    let dst = unified(dst, len, false)?;
    copy_ends(dst, src, len, stream)
}

/// cuMemsetD8/D16/D32(Async): `count` elements of `elem` bytes each set to `pattern`.
pub(crate) fn fill(
    dst: u64,
    pattern: u32,
    elem: usize,
    count: usize,
    stream: Option<u64>,
) -> CuResult<()> {
    context::live()?;
    if !dst.is_multiple_of(elem as u64) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if count == 0 {
        return Ok(());
    }
    let replay = move |s| fill(dst, pattern, elem, count, Some(s));
    if let Some(r) = captured(stream, TYPE_MEMSET, replay) {
        return r;
    }
    let len = count
        .checked_mul(elem)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let span = memory::span(dst, len as u64)?;
    let bytes = pattern.to_le_bytes();
    run(stream, false, move || {
        // SAFETY: the span covers `len` live bytes, kept alive by its block.
        let out = unsafe { std::slice::from_raw_parts_mut(span.ptr(), span.len()) };
        if bytes[..elem].iter().all(|&b| b == bytes[0]) {
            // One repeated byte (zeroing, most often): a plain memset.
            out.fill(bytes[0]);
        } else {
            for chunk in out.chunks_exact_mut(elem) {
                chunk.copy_from_slice(&bytes[..elem]);
            }
        }
    })
}

/// One side of a 2D copy, read from a `CUDA_MEMCPY2D`.
#[derive(Clone, Copy)]
pub(crate) struct Side2D {
    /// `CUmemorytype` as a raw value.
    pub(crate) memory_type: u32,
    /// Host pointer (HOST) or device address (DEVICE / UNIFIED).
    pub(crate) addr: u64,
    /// Byte offset of the first column.
    pub(crate) x: usize,
    /// First row.
    pub(crate) y: usize,
    /// Bytes between rows.
    pub(crate) pitch: usize,
}

/// `CUmemorytype` values.
pub(crate) const MEMORYTYPE_HOST: u32 = 1;
pub(crate) const MEMORYTYPE_DEVICE: u32 = 2;
pub(crate) const MEMORYTYPE_ARRAY: u32 = 3;
pub(crate) const MEMORYTYPE_UNIFIED: u32 = 4;

fn row_end(side: &Side2D, row: usize, width: usize, staged: bool) -> CuResult<End> {
    let offset = side
        .y
        .checked_add(row)
        .and_then(|r| r.checked_mul(side.pitch))
        .and_then(|o| o.checked_add(side.x))
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let addr = side
        .addr
        .checked_add(offset as u64)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    match side.memory_type {
        MEMORYTYPE_DEVICE => device(addr, width),
        MEMORYTYPE_HOST | MEMORYTYPE_UNIFIED => host(addr as *mut u8, width, staged),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// A CUDA array side (its `addr` the array handle) as the device memory holding the copied
/// rows, once they are checked to lie inside the array; other sides unchanged.
fn array_rows(side: &Side2D, width: usize, height: usize) -> CuResult<Side2D> {
    if side.memory_type != MEMORYTYPE_ARRAY {
        return Ok(*side);
    }
    let (addr, pitch, _) = array::flatten(side.addr, [side.x, side.y, 0], [width, height, 1])?;
    Ok(Side2D {
        memory_type: MEMORYTYPE_DEVICE,
        addr,
        pitch,
        ..*side
    })
}

/// cuMemcpy2D(Async): `height` rows of `width` bytes; a CUDA array side is its slice 0.
pub(crate) fn copy_2d(
    src: &Side2D,
    dst: &Side2D,
    width: usize,
    height: usize,
    stream: Option<u64>,
) -> CuResult<()> {
    context::live()?;
    let (src, dst) = (
        &array_rows(src, width, height)?,
        &array_rows(dst, width, height)?,
    );
    if height > 1 && (src.pitch < width || dst.pitch < width) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if width == 0 || height == 0 {
        return Ok(());
    }
    if let Some(r) = captured_copy(stream, || RawMemcpy3D::planar(src, dst, width, height)) {
        return r;
    }
    let mut rows = Vec::with_capacity(height);
    for row in 0..height {
        rows.push((
            row_end(dst, row, width, false)?,
            row_end(src, row, width, stream.is_some())?,
        ));
    }
    let must_wait = rows.iter().any(|(d, s)| d.is_pageable() || s.is_pageable());
    run(stream, must_wait, move || {
        for (d, s) in rows {
            // SAFETY: every row end was checked to cover `width` bytes (see copy_ends).
            unsafe { std::ptr::copy(s.ptr(), d.ptr(), width) };
        }
    })
}
