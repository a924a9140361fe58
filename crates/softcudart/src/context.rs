//! Which context a runtime call runs in. As NVIDIA's runtime does: each thread has a current
//! device (0 until `cudaSetDevice`); the first call that needs a context finds none current and
//! makes the device's primary context current, retaining it once per process (it is never
//! released: the runtime holds it until exit). A context the program made current through the
//! driver API is used as it is. A retain that fails because a kernel faulted on the device
//! earlier in the process (after `cudaDeviceReset`) is `cudaErrorDevicesUnavailable`, as NVIDIA's
//! runtime reports it.

use std::cell::Cell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use crate::driver::{CuResult, DevPtr, Driver, Handle, driver};
use crate::status::{Rt, check, code, put};

thread_local! {
    /// This thread's device (`cudaSetDevice` / `cudaGetDevice`).
    static DEVICE: Cell<c_int> = const { Cell::new(0) };
}

/// The primary contexts retained so far: (device ordinal, context address).
static PRIMARY: Mutex<Vec<(c_int, usize)>> = Mutex::new(Vec::new());

/// The driver, with a context current on this thread: the one already current, or this
/// thread's device's primary context.
pub(crate) fn current() -> Result<&'static Driver, Rt> {
    let d = driver()?;
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    if ctx.is_null() {
        bind(d, DEVICE.get())?;
    }
    Ok(d)
}

/// Runs `make`, a driver call creating something in the current context into the `T` it is
/// given (starting as `init`), and writes the result through the program's out-pointer `out`.
///
/// # Safety
/// `out` is NULL (`cudaErrorInvalidValue`, before any driver call) or valid for writing a `T`.
pub(crate) unsafe fn create<T>(
    out: *mut T,
    init: T,
    make: impl FnOnce(&Driver, &mut T) -> CuResult,
) -> Result<(), Rt> {
    if out.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let d = current()?;
    let mut made = init;
    check(make(d, &mut made))?;
    // SAFETY: the caller's contract.
    unsafe { put(out, made) }
}

// A device address reaches the program as a `void *`: the same 8 bytes on the 64-bit targets
// this runtime builds for.
const _: () = assert!(std::mem::size_of::<*mut c_void>() == std::mem::size_of::<DevPtr>());

/// [`create`] for a device address, which the program receives as a `void *`.
///
/// # Safety
/// `out` is NULL or valid for writing a `void *`.
pub(crate) unsafe fn create_address(
    out: *mut *mut c_void,
    make: impl FnOnce(&Driver, &mut DevPtr) -> CuResult,
) -> Result<(), Rt> {
    // SAFETY: a `void *` slot holds a `DevPtr` (same size, asserted above; written unaligned);
    // the caller's contract otherwise.
    unsafe { create(out.cast::<DevPtr>(), 0, make) }
}

/// Makes `device`'s primary context current on this thread (retained on first use).
fn bind(d: &Driver, device: c_int) -> Result<(), Rt> {
    let ctx = primary(d, device)?;
    // SAFETY: `ctx` is a retained primary context.
    check(unsafe { (d.cuCtxSetCurrent)(ctx as Handle) })
}

/// The driver's device handle (`CUdevice`) of the ordinal `device`; one out of range is
/// `cudaErrorInvalidDevice`, as the runtime reports it.
pub(crate) fn device_handle(d: &Driver, device: c_int) -> Result<c_int, Rt> {
    if !(0..device_count()?).contains(&device) {
        return Err(code::INVALID_DEVICE);
    }
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; the ordinal is in range.
    check(unsafe { (d.cuDeviceGet)(&mut dev, device) })?;
    Ok(dev)
}

/// The driver's device handle of this thread's device (of the current context's, if one is
/// current).
pub(crate) fn current_device_handle(d: &Driver) -> Result<c_int, Rt> {
    device_handle(d, get_device()?)
}

/// `cudaInitDevice`: initialises `device`'s primary context without making it current; with
/// `cudaInitDeviceFlagsAreValid` (1) in `flags`, `device_flags` (as `cudaSetDeviceFlags` takes
/// them) first become its flags.
pub(crate) fn init_device(device: c_int, device_flags: c_uint, flags: c_uint) -> Result<(), Rt> {
    let d = driver()?;
    let dev = device_handle(d, device)?;
    match flags {
        0 => {}
        1 => set_flags(d, dev, device_flags)?,
        _ => return Err(code::INVALID_VALUE),
    }
    primary(d, device).map(drop)
}

/// The flags `cudaSetDeviceFlags` accepts: a scheduling mode (`cudaDeviceScheduleMask`),
/// `cudaDeviceMapHost`, `cudaDeviceLmemResizeToMax` and `cudaDeviceSyncMemops`; the driver's
/// `CU_CTX_*` values are the same.
const DEVICE_FLAGS: c_uint = 0x07 | 0x08 | 0x10 | 0x80;

/// Makes `flags` the flags of the primary context of the driver device `dev` (applied to it
/// now if it is active, as runtimes since CUDA 12 do).
fn set_flags(d: &Driver, dev: c_int, flags: c_uint) -> Result<(), Rt> {
    if flags & !DEVICE_FLAGS != 0 {
        return Err(code::INVALID_VALUE);
    }
    // SAFETY: plain values; the driver checks the scheduling mode.
    check(unsafe { (d.cuDevicePrimaryCtxSetFlags_v2)(dev, flags) })
}

/// `cudaDeviceMapHost`: implicit in every context the runtime makes (host memory is always
/// mapped with unified addressing), so reported for them whatever the driver says.
const MAP_HOST: c_uint = 0x08;

/// `cudaSetDeviceFlags`: sets this thread's device's flags and initialises its primary context
/// (not made current), as NVIDIA documents for runtimes since CUDA 12.
pub(crate) fn set_device_flags(flags: c_uint) -> Result<(), Rt> {
    let d = driver()?;
    let device = get_device()?;
    set_flags(d, device_handle(d, device)?, flags)?;
    primary(d, device).map(drop)
}

/// `cudaGetDeviceFlags`: the current context's flags (with `cudaDeviceMapHost` for a primary
/// context, which the runtime made), or those this thread's device's primary context has (or
/// will be created with).
pub(crate) fn get_flags() -> Result<c_uint, Rt> {
    let d = driver()?;
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    let mut flags = 0;
    if ctx.is_null() {
        let dev = device_handle(d, DEVICE.get())?;
        let mut active = 0;
        // SAFETY: valid out-pointers; `dev` is a device from the driver.
        check(unsafe { (d.cuDevicePrimaryCtxGetState)(dev, &mut flags, &mut active) })?;
        return Ok(flags | MAP_HOST);
    }
    // SAFETY: `flags` is a valid out-pointer; a context is current.
    check(unsafe { (d.cuCtxGetFlags)(&mut flags) })?;
    let primary = PRIMARY.lock().unwrap_or_else(|p| p.into_inner());
    let runtimes = primary.iter().any(|&(_, c)| c == ctx as usize);
    Ok(if runtimes { flags | MAP_HOST } else { flags })
}

/// The primary context of `device` (a valid ordinal), retained once per process: what
/// `cudaMemcpyPeer` names each side's context by.
pub(crate) fn primary_context(d: &Driver, device: c_int) -> Result<Handle, Rt> {
    device_handle(d, device)?;
    primary(d, device).map(|ctx| ctx as Handle)
}

/// The primary context of `device`, retained once per process.
fn primary(d: &Driver, device: c_int) -> Result<usize, Rt> {
    let mut primary = PRIMARY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, ctx)) = primary.iter().find(|(dev, _)| *dev == device) {
        return Ok(ctx);
    }
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; an ordinal out of range is the driver's error.
    check(unsafe { (d.cuDeviceGet)(&mut dev, device) })?;
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer and `dev` a device handle from cuDeviceGet.
    check(unsafe { (d.cuDevicePrimaryCtxRetain)(&mut ctx, dev) })
        .map_err(unavailable_if_faulted)?;
    primary.push((device, ctx as usize));
    Ok(ctx as usize)
}

/// The kernel faults the driver keeps for the rest of the process: illegal address (700),
/// launch timeout (702), assert (710), hardware stack error (714) to launch failed (719).
fn is_fault(e: Rt) -> bool {
    matches!(e.0, 700 | 702 | 710 | 714..=719)
}

/// What a failed primary-context retain becomes: `cudaErrorDevicesUnavailable` where the device
/// faulted earlier in the process (both drivers answer the fault to a retain after the reset
/// that `cudaDeviceReset` does, and NVIDIA's runtime 13 answered 46 to the `cudaMalloc` that
/// followed on the H200: runtime_semantics.cu, bench/h200-runs/2026-12-02-s14/27dee54; seen for
/// 700, the other faults assumed alike); any other error as the driver gave it.
fn unavailable_if_faulted(e: Rt) -> Rt {
    if is_fault(e) {
        code::DEVICES_UNAVAILABLE
    } else {
        e
    }
}

/// `cudaDeviceReset`: destroys the primary context of this thread's device (of the current
/// context's device, if one is current) with everything in it, and lets go of this runtime's
/// hold on it; the next call that needs a context starts a fresh one. Other threads must have
/// stopped using the device, as NVIDIA documents.
pub(crate) fn reset_device() -> Result<(), Rt> {
    let d = driver()?;
    let device = reset_target(d)?;
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; a bad ordinal is the driver's error.
    check(unsafe { (d.cuDeviceGet)(&mut dev, device) })?;
    let mut primary = PRIMARY.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: `dev` is a device from the driver.
    check(unsafe { (d.cuDevicePrimaryCtxReset_v2)(dev) })?;
    if let Some(i) = primary.iter().position(|(ordinal, _)| *ordinal == device) {
        let (_, ctx) = primary.swap_remove(i);
        // A reset does not release the retain this runtime holds (NVIDIA's driver documents
        // this); a driver that released it already answers an error, which changes nothing.
        // SAFETY: `dev` is a device from the driver.
        let _ = unsafe { (d.cuDevicePrimaryCtxRelease_v2)(dev) };
        let mut current: Handle = std::ptr::null_mut();
        // SAFETY: `current` is a valid out-pointer.
        check(unsafe { (d.cuCtxGetCurrent)(&mut current) })?;
        if current as usize == ctx {
            // SAFETY: NULL unbinds this thread's context.
            check(unsafe { (d.cuCtxSetCurrent)(std::ptr::null_mut()) })?;
        }
    }
    Ok(())
}

/// The device `cudaDeviceReset` resets: the current context's, found among this runtime's
/// primary contexts without asking the driver (whose `cuCtxGetDevice` fails once a kernel has
/// faulted in the context, while a reset must still go ahead), else [`get_device`]'s.
fn reset_target(d: &Driver) -> Result<c_int, Rt> {
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    let primary = PRIMARY.lock().unwrap_or_else(|p| p.into_inner());
    match primary.iter().find(|&&(_, c)| c == ctx as usize) {
        Some(&(device, _)) => Ok(device),
        None => {
            drop(primary);
            get_device()
        }
    }
}

/// The number of devices; none is `cudaErrorNoDevice`, as the runtime reports it.
pub(crate) fn device_count() -> Result<c_int, Rt> {
    let d = driver()?;
    let mut count = 0;
    // SAFETY: `count` is a valid out-pointer.
    check(unsafe { (d.cuDeviceGetCount)(&mut count) })?;
    if count == 0 {
        return Err(code::NO_DEVICE);
    }
    Ok(count)
}

/// `cudaSetDevice`: checks the ordinal, makes it this thread's device, and (as runtimes since
/// CUDA 12 do) initialises its primary context and makes it current at once.
pub(crate) fn set_device(device: c_int) -> Result<(), Rt> {
    let count = device_count()?;
    if !(0..count).contains(&device) {
        return Err(code::INVALID_DEVICE);
    }
    DEVICE.set(device);
    bind(driver()?, device)
}

/// `cudaGetDevice`: the device of the current context if one is current, else this thread's.
pub(crate) fn get_device() -> Result<c_int, Rt> {
    let d = driver()?;
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check(unsafe { (d.cuCtxGetCurrent)(&mut ctx) })?;
    if ctx.is_null() {
        return Ok(DEVICE.get());
    }
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; a context is current.
    check(unsafe { (d.cuCtxGetDevice)(&mut dev) })?;
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retain_failing_with_a_kernel_fault_is_devices_unavailable_and_other_errors_pass() {
        for fault in [700, 702, 710, 714, 715, 716, 717, 718, 719] {
            assert_eq!(unavailable_if_faulted(Rt(fault)), code::DEVICES_UNAVAILABLE);
        }
        for other in [1, 2, 101, 201, 713, 720, 999] {
            assert_eq!(unavailable_if_faulted(Rt(other)), Rt(other));
        }
    }
}
