//! Streams, events and kernel launches: cuStream*, cuEvent*, cuLaunchKernel.

use std::ffi::c_void;
use std::ptr;

use cudarc::driver::sys::{self, CUevent, CUfunction, CUstream};

use super::{DriverResult, ok};

/// cuStreamCreate with CU_STREAM_NON_BLOCKING.
///
/// # Safety
/// The caller's context is bound; the stream is the caller's (pooled or destroyed by it).
pub(crate) unsafe fn create_non_blocking() -> DriverResult<CUstream> {
    let mut s: CUstream = ptr::null_mut();
    // SAFETY: `s` is a valid out pointer; context and ownership as the caller promises.
    ok("cuStreamCreate", unsafe {
        sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
    })?;
    Ok(s)
}

/// cuStreamQuery: Ok when `stream` has no work queued or running (CUDA_ERROR_NOT_READY when
/// it has).
///
/// # Safety
/// `stream` is a live stream of the bound context (null: its legacy default stream).
pub(crate) unsafe fn query(stream: CUstream) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuStreamQuery", unsafe { sys::cuStreamQuery(stream) })
}

/// cuStreamSynchronize: waits for `stream`'s work.
///
/// # Safety
/// `stream` is a live stream of the bound context (null: its legacy default stream).
pub(crate) unsafe fn synchronize(stream: CUstream) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })
}

/// cuStreamWaitEvent: later work on `stream` waits for `event`.
///
/// # Safety
/// Both handles are live in the bound context.
pub(crate) unsafe fn wait_event(stream: CUstream, event: CUevent) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuStreamWaitEvent", unsafe {
        sys::cuStreamWaitEvent(stream, event, 0)
    })
}

/// cuEventCreate with `flags` (CUevent_flags).
///
/// # Safety
/// The caller's context is bound; the event is the caller's (pooled or destroyed by it).
pub(crate) unsafe fn event_create(flags: u32) -> DriverResult<CUevent> {
    let mut e: CUevent = ptr::null_mut();
    // SAFETY: `e` is a valid out pointer; context and ownership as the caller promises.
    ok("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags)
    })?;
    Ok(e)
}

/// cuEventRecord: records `event` at the current end of `stream`.
///
/// # Safety
/// Both handles are live in the bound context.
pub(crate) unsafe fn record(event: CUevent, stream: CUstream) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuEventRecord", unsafe {
        sys::cuEventRecord(event, stream)
    })
}

/// cuEventQuery: Ok once `event` has completed (CUDA_ERROR_NOT_READY before).
///
/// # Safety
/// `event` is a live event of the bound context.
pub(crate) unsafe fn event_query(event: CUevent) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuEventQuery", unsafe { sys::cuEventQuery(event) })
}

/// cuEventSynchronize: waits until `event` has completed.
///
/// # Safety
/// `event` is a live event of the bound context.
pub(crate) unsafe fn event_synchronize(event: CUevent) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuEventSynchronize", unsafe {
        sys::cuEventSynchronize(event)
    })
}

/// cuEventElapsedTime: milliseconds from `start` to `end`.
///
/// # Safety
/// Both are live timing events of the bound context.
pub(crate) unsafe fn elapsed_ms(start: CUevent, end: CUevent) -> DriverResult<f32> {
    let mut ms = 0f32;
    // SAFETY: `ms` is a valid out pointer; the events as the caller promises (above).
    ok("cuEventElapsedTime", unsafe {
        sys::cuEventElapsedTime(&mut ms, start, end)
    })?;
    Ok(ms)
}

/// cuLaunchKernel: `func` over `grid` × `block` with `shared` bytes of dynamic shared memory.
///
/// # Safety
/// `func` and `stream` belong to the bound context; `params` holds exactly one pointer per
/// kernel parameter, each to a value of the parameter's size, alive for the call (the driver
/// copies them); every buffer the kernel touches stays alive until it has run.
pub(crate) unsafe fn launch(
    func: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above); no `extra` array.
    ok("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            func,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared,
            stream,
            params,
            ptr::null_mut(),
        )
    })
}
