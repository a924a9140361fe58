//! Devices, primary contexts and contexts: cuDevice*, cuDevicePrimaryCtx*, cuCtx*.

use std::ffi::{CStr, c_char};
use std::ptr;

use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdevice_attribute};

use super::{DriverResult, ok};

/// cuDeviceGet: the device of `ordinal`.
pub(crate) fn device(ordinal: i32) -> DriverResult<CUdevice> {
    let mut dev = 0;
    // SAFETY: `dev` is a valid out pointer; a bad ordinal is an error code.
    ok("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut dev, ordinal)
    })?;
    Ok(dev)
}

/// cuDeviceGetAttribute.
pub(crate) fn attribute(dev: CUdevice, a: CUdevice_attribute) -> DriverResult<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out pointer; a bad device is an error code.
    ok("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, a, dev)
    })?;
    Ok(v)
}

/// cuDeviceTotalMem_v2: the device's memory in bytes.
pub(crate) fn total_mem(dev: CUdevice) -> DriverResult<usize> {
    let mut total = 0usize;
    // SAFETY: `total` is a valid out pointer; a bad device is an error code.
    ok("cuDeviceTotalMem_v2", unsafe {
        sys::cuDeviceTotalMem_v2(&mut total, dev)
    })?;
    Ok(total)
}

/// cuDeviceGetName: the device's name as the driver reports it.
pub(crate) fn name(dev: CUdevice) -> DriverResult<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: buf is writable for its whole length, which is what we pass.
    ok("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // The driver NUL-terminates the name within the buffer; the last byte is forced to NUL.
    buf[255] = 0;
    // SAFETY: buf holds a NUL-terminated string (last byte forced to 0 above).
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// cuDevicePrimaryCtxRetain: one more retain of `dev`'s primary context.
///
/// # Safety
/// The caller owns the retain and releases it at most once (or loses it with the context).
pub(crate) unsafe fn primary_retain(dev: CUdevice) -> DriverResult<CUcontext> {
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: valid out pointer; the retain's ownership is the caller's (above).
    ok("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
    })?;
    Ok(ctx)
}

/// cuDevicePrimaryCtxRelease_v2: drops one retain of `dev`'s primary context.
///
/// # Safety
/// The caller releases a retain it owns (or one that cannot keep a live context alive): a
/// release too many destroys a context others still use.
pub(crate) unsafe fn primary_release(dev: CUdevice) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuDevicePrimaryCtxRelease_v2", unsafe {
        sys::cuDevicePrimaryCtxRelease_v2(dev)
    })
}

/// cuDevicePrimaryCtxGetState: whether `dev`'s primary context is active.
pub(crate) fn primary_active(dev: CUdevice) -> DriverResult<bool> {
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: valid out pointers; a bad device is an error code.
    ok("cuDevicePrimaryCtxGetState", unsafe {
        sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)
    })?;
    Ok(active != 0)
}

/// cuCtxGetCurrent: the context bound to this thread (null when none).
pub(crate) fn current() -> DriverResult<CUcontext> {
    let mut cur: CUcontext = ptr::null_mut();
    // SAFETY: `cur` is a valid out pointer.
    ok("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    Ok(cur)
}

/// cuCtxSetCurrent: binds `ctx` to this thread.
///
/// # Safety
/// `ctx` is a context handle the caller obtained from the driver (a destroyed one is answered
/// with an error code, which the caller must handle as a loss).
pub(crate) unsafe fn set_current(ctx: CUcontext) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })
}

/// cuCtxGetId: the process-unique id of `ctx` (null: of the context bound to this thread).
///
/// # Safety
/// `ctx` is null or a context handle the caller obtained from the driver; a stale one yields
/// an error code.
pub(crate) unsafe fn id(ctx: CUcontext) -> DriverResult<u64> {
    let mut id = 0;
    // SAFETY: `id` is a valid out pointer; `ctx` as the caller promises (above).
    ok("cuCtxGetId", unsafe { sys::cuCtxGetId(ctx, &mut id) })?;
    Ok(id)
}

/// cuCtxSynchronize: waits for all work of the bound context.
pub(crate) fn synchronize() -> DriverResult {
    // SAFETY: no arguments; without a bound context the driver answers an error code.
    ok("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// cuCtxCreate_v4: a new plain context on `dev` (no affinity, no CIG), pushed current.
///
/// # Safety
/// The caller owns the context: it pops it and destroys it once.
pub(crate) unsafe fn create(dev: CUdevice) -> DriverResult<CUcontext> {
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: zeroed create-params mean a plain context (no affinity, no CIG), as CUDA 13's
    // cuCtxCreate documents.
    let mut params: sys::CUctxCreateParams = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer and params; ownership as the caller promises (above).
    ok("cuCtxCreate_v4", unsafe {
        sys::cuCtxCreate_v4(&mut ctx, &mut params, 0, dev)
    })?;
    Ok(ctx)
}

/// cuCtxDestroy_v2.
///
/// # Safety
/// `ctx` is the caller's own context, current on no thread, destroyed once.
pub(crate) unsafe fn destroy(ctx: CUcontext) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuCtxDestroy_v2", unsafe { sys::cuCtxDestroy_v2(ctx) })
}

/// cuCtxPushCurrent_v2.
///
/// # Safety
/// `ctx` is a live context; the caller pops it again.
pub(crate) unsafe fn push(ctx: CUcontext) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuCtxPushCurrent_v2", unsafe {
        sys::cuCtxPushCurrent_v2(ctx)
    })
}

/// cuCtxPopCurrent_v2: pops this thread's current context, returning it.
///
/// # Safety
/// The context popped is one the caller pushed (or made current by creating it).
pub(crate) unsafe fn pop() -> DriverResult<CUcontext> {
    let mut popped: CUcontext = ptr::null_mut();
    // SAFETY: valid out pointer; what is popped as the caller promises (above).
    ok("cuCtxPopCurrent_v2", unsafe {
        sys::cuCtxPopCurrent_v2(&mut popped)
    })?;
    Ok(popped)
}
