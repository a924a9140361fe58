//! Exported entry points for streams and events. A `cudaStream_t` is the driver's `CUstream`
//! and a `cudaEvent_t` its `CUevent`, as in NVIDIA's runtime (the special streams 0, legacy 1
//! and per-thread 2 have the same values), and the flag values are the driver's.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it; NULL out-pointers
//! are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::context;
use crate::driver::Handle;
use crate::status::{Rt, api, check, code, put};

/// Creates a blocking stream.
pub(crate) unsafe extern "C" fn cudaStreamCreate(stream: *mut Handle) -> c_int {
    api(|| create_stream(stream, 0))
}

/// Creates a stream with flags.
pub(crate) unsafe extern "C" fn cudaStreamCreateWithFlags(
    stream: *mut Handle,
    flags: c_uint,
) -> c_int {
    api(|| create_stream(stream, flags))
}

/// Creates a stream with `flags` (`cudaStreamDefault` 0 or `cudaStreamNonBlocking` 1).
fn create_stream(stream: *mut Handle, flags: c_uint) -> Result<(), Rt> {
    // SAFETY: `stream` is NULL or valid (the contract above); the closure's pointer is valid;
    // the driver checks the flags.
    unsafe {
        context::create(stream, std::ptr::null_mut(), |d, s| {
            (d.cuStreamCreate)(s, flags)
        })
    }
}

/// Creates an event with `flags` (`cudaEventDefault` 0, `BlockingSync` 1, `DisableTiming` 2,
/// `Interprocess` 4).
fn create_event(event: *mut Handle, flags: c_uint) -> Result<(), Rt> {
    // SAFETY: `event` is NULL or valid (the contract above); the closure's pointer is valid;
    // the driver checks the flags.
    unsafe {
        context::create(event, std::ptr::null_mut(), |d, e| {
            (d.cuEventCreate)(e, flags)
        })
    }
}

/// Runs one driver call on a handle in the current context.
fn on_handle(call: impl FnOnce(&crate::driver::Driver) -> c_int) -> Result<(), Rt> {
    let d = context::current()?;
    check(call(d))
}

/// Destroys a stream (its work still completes).
pub(crate) unsafe extern "C" fn cudaStreamDestroy(stream: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuStreamDestroy_v2)(stream) }))
}

/// Waits for a stream's work.
pub(crate) unsafe extern "C" fn cudaStreamSynchronize(stream: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuStreamSynchronize)(stream) }))
}

/// Whether a stream's work is done (`cudaErrorNotReady` if not).
pub(crate) unsafe extern "C" fn cudaStreamQuery(stream: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuStreamQuery)(stream) }))
}

/// Makes a stream's later work wait for an event.
pub(crate) unsafe extern "C" fn cudaStreamWaitEvent(
    stream: Handle,
    event: Handle,
    flags: c_uint,
) -> c_int {
    // SAFETY: the driver checks the handles and flags.
    api(|| on_handle(|d| unsafe { (d.cuStreamWaitEvent)(stream, event, flags) }))
}

/// Creates an event.
pub(crate) unsafe extern "C" fn cudaEventCreate(event: *mut Handle) -> c_int {
    api(|| create_event(event, 0))
}

/// Creates an event with flags.
pub(crate) unsafe extern "C" fn cudaEventCreateWithFlags(
    event: *mut Handle,
    flags: c_uint,
) -> c_int {
    api(|| create_event(event, flags))
}

/// Records an event on a stream.
pub(crate) unsafe extern "C" fn cudaEventRecord(event: Handle, stream: Handle) -> c_int {
    // SAFETY: the driver checks the handles.
    api(|| on_handle(|d| unsafe { (d.cuEventRecord)(event, stream) }))
}

/// Waits for an event.
pub(crate) unsafe extern "C" fn cudaEventSynchronize(event: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuEventSynchronize)(event) }))
}

/// Whether an event has happened (`cudaErrorNotReady` if not).
pub(crate) unsafe extern "C" fn cudaEventQuery(event: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuEventQuery)(event) }))
}

/// Milliseconds between two recorded events.
pub(crate) unsafe extern "C" fn cudaEventElapsedTime(
    ms: *mut f32,
    start: Handle,
    end: Handle,
) -> c_int {
    api(|| {
        if ms.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let mut t = 0.0;
        // SAFETY: `t` is a valid out-pointer; the driver checks the handles.
        on_handle(|d| unsafe { (d.cuEventElapsedTime_v2)(&mut t, start, end) })?;
        // SAFETY: the contract above.
        unsafe { put(ms, t) }
    })
}

/// Destroys an event.
pub(crate) unsafe extern "C" fn cudaEventDestroy(event: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| on_handle(|d| unsafe { (d.cuEventDestroy_v2)(event) }))
}

/// Creates a stream with flags and a priority (lower numbers are greater priorities; the
/// driver clamps one outside the device's range).
pub(crate) unsafe extern "C" fn cudaStreamCreateWithPriority(
    stream: *mut Handle,
    flags: c_uint,
    priority: c_int,
) -> c_int {
    // SAFETY: `stream` is NULL or valid (the contract above); the closure's pointer is valid;
    // the driver checks the flags.
    api(|| unsafe {
        context::create(stream, std::ptr::null_mut(), |d, s| {
            (d.cuStreamCreateWithPriority)(s, flags, priority)
        })
    })
}

/// The flags a stream was created with.
pub(crate) unsafe extern "C" fn cudaStreamGetFlags(stream: Handle, flags: *mut c_uint) -> c_int {
    api(|| {
        if flags.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let mut f = 0;
        // SAFETY: `f` is a valid out-pointer; the driver checks the handle.
        on_handle(|d| unsafe { (d.cuStreamGetFlags)(stream, &mut f) })?;
        // SAFETY: the contract above.
        unsafe { put(flags, f) }
    })
}

/// The priority a stream was created with.
pub(crate) unsafe extern "C" fn cudaStreamGetPriority(
    stream: Handle,
    priority: *mut c_int,
) -> c_int {
    api(|| {
        if priority.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let mut p = 0;
        // SAFETY: `p` is a valid out-pointer; the driver checks the handle.
        on_handle(|d| unsafe { (d.cuStreamGetPriority)(stream, &mut p) })?;
        // SAFETY: the contract above.
        unsafe { put(priority, p) }
    })
}

/// Records an event with flags (`cudaEventRecordDefault` 0, `cudaEventRecordExternal` 1).
pub(crate) unsafe extern "C" fn cudaEventRecordWithFlags(
    event: Handle,
    stream: Handle,
    flags: c_uint,
) -> c_int {
    // SAFETY: the driver checks the handles and flags.
    api(|| on_handle(|d| unsafe { (d.cuEventRecordWithFlags)(event, stream, flags) }))
}

/// A host function: `void (*)(void *)`, as `cudaHostFn_t` is.
pub(crate) type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// Runs `func(data)` on the host in order with `stream`'s work.
pub(crate) unsafe extern "C" fn cudaLaunchHostFunc(
    stream: Handle,
    func: HostFn,
    data: *mut c_void,
) -> c_int {
    api(|| {
        let func = func.ok_or(code::INVALID_VALUE)?;
        // SAFETY: `func` is the program's host function, which the driver calls with `data`
        // as the C API documents; the driver checks the stream.
        on_handle(|d| unsafe { (d.cuLaunchHostFunc)(stream, func as Handle, data) })
    })
}

/// A stream callback: `void (*)(cudaStream_t, cudaError_t, void *)`, as `cudaStreamCallback_t`
/// (and the driver's `CUstreamCallback`, the same shape) is.
pub(crate) type StreamCallback = Option<unsafe extern "C" fn(Handle, c_int, *mut c_void)>;

/// Calls `callback(stream, status, data)` on the host in order with `stream`'s work (`flags`
/// must be 0).
pub(crate) unsafe extern "C" fn cudaStreamAddCallback(
    stream: Handle,
    callback: StreamCallback,
    data: *mut c_void,
    flags: c_uint,
) -> c_int {
    api(|| {
        let callback = callback.ok_or(code::INVALID_VALUE)?;
        // SAFETY: `callback` is the program's, which the driver calls with a stream, a status
        // and `data` (the runtime's codes are the driver's); the driver checks the rest.
        on_handle(|d| unsafe { (d.cuStreamAddCallback)(stream, callback as Handle, data, flags) })
    })
}
