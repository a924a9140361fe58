//! Exported entry points for versions, devices, synchronisation and errors.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it; NULL out-pointers
//! are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint};

use crate::driver::{self, RUNTIME_VERSION};
use crate::status::{self, Rt, api, check, put};
use crate::{context, properties};

/// The CUDA version the driver supports; 0 (and success) when no driver can be loaded, as the
/// runtime API documents.
pub(crate) unsafe extern "C" fn cudaDriverGetVersion(version: *mut c_int) -> c_int {
    api(|| {
        let mut v = 0;
        if let Ok(d) = driver::loaded() {
            // SAFETY: `v` is a valid out-pointer.
            check(unsafe { (d.cuDriverGetVersion)(&mut v) })?;
        }
        // SAFETY: the contract above.
        unsafe { put(version, v) }
    })
}

/// This runtime's version: CUDA 13.0.
pub(crate) unsafe extern "C" fn cudaRuntimeGetVersion(version: *mut c_int) -> c_int {
    // SAFETY: the contract above.
    api(|| unsafe { put(version, RUNTIME_VERSION) })
}

/// The number of devices (0 with `cudaErrorNoDevice` when there is none).
pub(crate) unsafe extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> c_int {
    api(|| {
        // SAFETY: the contract above.
        unsafe { put(count, 0)? };
        let n = context::device_count()?;
        // SAFETY: the contract above.
        unsafe { put(count, n) }
    })
}

/// Makes `device` this thread's device and its primary context current.
pub(crate) unsafe extern "C" fn cudaSetDevice(device: c_int) -> c_int {
    api(|| context::set_device(device))
}

/// This thread's device.
pub(crate) unsafe extern "C" fn cudaGetDevice(device: *mut c_int) -> c_int {
    api(|| {
        if device.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let dev = context::get_device()?;
        // SAFETY: the contract above.
        unsafe { put(device, dev) }
    })
}

/// One device attribute; `cudaDeviceAttr` numbers are the driver's `CUdevice_attribute` ones.
pub(crate) unsafe extern "C" fn cudaDeviceGetAttribute(
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> c_int {
    api(|| {
        if value.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let d = driver::driver()?;
        let mut dev = 0;
        // SAFETY: `dev` is a valid out-pointer; a bad ordinal is the driver's error.
        check(unsafe { (d.cuDeviceGet)(&mut dev, device) })?;
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer, `dev` a device from the driver.
        check(unsafe { (d.cuDeviceGetAttribute)(&mut v, attr, dev) })?;
        // SAFETY: the contract above.
        unsafe { put(value, v) }
    })
}

/// The properties of a device (CUDA 13.0's `struct cudaDeviceProp`).
pub(crate) unsafe extern "C" fn cudaGetDeviceProperties(
    prop: *mut properties::DeviceProp,
    device: c_int,
) -> c_int {
    api(|| {
        if prop.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let p = properties::properties(device)?;
        // SAFETY: the contract above: `prop` points to a `struct cudaDeviceProp`.
        unsafe { put(prop, p) }
    })
}

/// Waits for all work in the current context.
pub(crate) unsafe extern "C" fn cudaDeviceSynchronize() -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: no arguments; a context is current.
        check(unsafe { (d.cuCtxSynchronize)() })
    })
}

/// Destroys the current device's primary context and all it holds; the next call starts afresh.
pub(crate) unsafe extern "C" fn cudaDeviceReset() -> c_int {
    api(context::reset_device)
}

/// Free and total device memory of the current context's device.
pub(crate) unsafe extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> c_int {
    api(|| {
        if free.is_null() || total.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let d = context::current()?;
        let (mut f, mut t) = (0, 0);
        // SAFETY: valid out-pointers; a context is current.
        check(unsafe { (d.cuMemGetInfo_v2)(&mut f, &mut t) })?;
        // SAFETY: the contract above.
        unsafe {
            put(free, f)?;
            put(total, t)
        }
    })
}

/// This thread's last error, reset to success (a kernel fault too: see `status::take_last`).
pub(crate) unsafe extern "C" fn cudaGetLastError() -> c_int {
    status::take_last()
}

/// This thread's last error, kept.
pub(crate) unsafe extern "C" fn cudaPeekAtLastError() -> c_int {
    status::peek_last()
}

/// The message of an error code.
pub(crate) unsafe extern "C" fn cudaGetErrorString(error: c_int) -> *const c_char {
    status::message(error)
}

/// The name of an error code.
pub(crate) unsafe extern "C" fn cudaGetErrorName(error: c_int) -> *const c_char {
    status::name(error)
}

/// Initialises a device's primary context without making it current (`flags` 1: with
/// `device_flags` as its flags first).
pub(crate) unsafe extern "C" fn cudaInitDevice(
    device: c_int,
    device_flags: c_uint,
    flags: c_uint,
) -> c_int {
    api(|| context::init_device(device, device_flags, flags))
}

/// Sets the flags of this thread's device's primary context (scheduling, `cudaDeviceMapHost`,
/// `cudaDeviceLmemResizeToMax`, `cudaDeviceSyncMemops`) and initialises it.
pub(crate) unsafe extern "C" fn cudaSetDeviceFlags(flags: c_uint) -> c_int {
    api(|| context::set_device_flags(flags))
}

/// The flags of the current context, or of this thread's device's primary context.
pub(crate) unsafe extern "C" fn cudaGetDeviceFlags(flags: *mut c_uint) -> c_int {
    api(|| {
        if flags.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let f = context::get_flags()?;
        // SAFETY: the contract above.
        unsafe { put(flags, f) }
    })
}

/// The `cudaLimit` values (`cudaLimitStackSize` 0 … `cudaLimitPersistingL2CacheSize` 6), the
/// same numbers as the driver's `CUlimit`; the driver has more (`CU_LIMIT_SHMEM_SIZE`, the CIG
/// limits) that the runtime does not name.
const RUNTIME_LIMITS: std::ops::RangeInclusive<c_int> = 0..=6;

/// Refuses a limit the runtime does not have with `cudaErrorInvalidValue` before the driver is
/// asked: NVIDIA's runtime answered that for limit 0x7777 on the H200 (its documentation says
/// `cudaErrorUnsupportedLimit`), and the drivers answer differently (softcuda UNSUPPORTED_LIMIT,
/// NVIDIA's INVALID_VALUE), so the answer must not depend on which one runs below.
fn runtime_limit(limit: c_int) -> Result<c_int, Rt> {
    if RUNTIME_LIMITS.contains(&limit) {
        Ok(limit)
    } else {
        Err(status::code::INVALID_VALUE)
    }
}

/// One `cudaLimit` of the current context (the driver's `CUlimit` numbers).
pub(crate) unsafe extern "C" fn cudaDeviceGetLimit(value: *mut usize, limit: c_int) -> c_int {
    api(|| {
        if value.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let limit = runtime_limit(limit)?;
        let d = context::current()?;
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer; the limit is one the runtime names.
        check(unsafe { (d.cuCtxGetLimit)(&mut v, limit) })?;
        // SAFETY: the contract above.
        unsafe { put(value, v) }
    })
}

/// Sets one `cudaLimit` of the current context.
pub(crate) unsafe extern "C" fn cudaDeviceSetLimit(limit: c_int, value: usize) -> c_int {
    api(|| {
        let limit = runtime_limit(limit)?;
        let d = context::current()?;
        // SAFETY: plain values; the limit is one the runtime names, the driver checks the value.
        check(unsafe { (d.cuCtxSetLimit)(limit, value) })
    })
}

/// The least and greatest stream priorities; either pointer may be NULL.
pub(crate) unsafe extern "C" fn cudaDeviceGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> c_int {
    api(|| {
        let d = context::current()?;
        let (mut l, mut g) = (0, 0);
        // SAFETY: valid out-pointers; a context is current.
        check(unsafe { (d.cuCtxGetStreamPriorityRange)(&mut l, &mut g) })?;
        for (out, v) in [(least, l), (greatest, g)] {
            if !out.is_null() {
                // SAFETY: non-NULL, so valid for a write (the contract above).
                unsafe { put(out, v)? };
            }
        }
        Ok(())
    })
}

/// Records the current context's cache preference (`cudaFuncCache`).
pub(crate) unsafe extern "C" fn cudaDeviceSetCacheConfig(config: c_int) -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: a plain value; the driver checks it.
        check(unsafe { (d.cuCtxSetCacheConfig)(config) })
    })
}

/// The current context's cache preference.
pub(crate) unsafe extern "C" fn cudaDeviceGetCacheConfig(config: *mut c_int) -> c_int {
    api(|| {
        if config.is_null() {
            return Err(status::code::INVALID_VALUE);
        }
        let d = context::current()?;
        let mut c = 0;
        // SAFETY: `c` is a valid out-pointer; a context is current.
        check(unsafe { (d.cuCtxGetCacheConfig)(&mut c) })?;
        // SAFETY: the contract above.
        unsafe { put(config, c) }
    })
}

/// Starts the profiler's collection (the driver's; softcuda has no profiler and succeeds).
pub(crate) unsafe extern "C" fn cudaProfilerStart() -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: no arguments; a context is current.
        check(unsafe { (d.cuProfilerStart)() })
    })
}

/// Stops the profiler's collection.
pub(crate) unsafe extern "C" fn cudaProfilerStop() -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: no arguments; a context is current.
        check(unsafe { (d.cuProfilerStop)() })
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    use super::*;

    #[test]
    fn limits_the_runtime_does_not_name_are_invalid_values_before_the_driver_is_asked() {
        let mut v = 0usize;
        // 7 is the driver's CU_LIMIT_SHMEM_SIZE, which cudaLimit does not have.
        for limit in [-1, 7, 0x7777] {
            // SAFETY: `v` is a live usize.
            let r = unsafe { cudaDeviceGetLimit(&mut v, limit) };
            assert_eq!(r, status::code::INVALID_VALUE.0, "get {limit}");
            // SAFETY: plain values.
            let r = unsafe { cudaDeviceSetLimit(limit, 1024) };
            assert_eq!(r, status::code::INVALID_VALUE.0, "set {limit}");
        }
        assert_eq!(status::take_last(), status::code::INVALID_VALUE.0);
    }

    /// NULL out-pointers and a NULL launch configuration that NVIDIA's runtime does not check
    /// (its documentation lists no cudaErrorInvalidValue for them; runtime_features.cu no
    /// longer passes them, as the program must survive NVIDIA's runtime): softcudart refuses
    /// them before any driver call.
    #[test]
    fn null_pointers_nvidia_leaves_unchecked_are_invalid_value_here() {
        let invalid = status::code::INVALID_VALUE.0;
        // SAFETY: NULL is what is being refused; nothing is written through it.
        unsafe {
            assert_eq!(cudaGetDeviceFlags(std::ptr::null_mut()), invalid);
            assert_eq!(cudaDeviceGetCacheConfig(std::ptr::null_mut()), invalid);
            let kernel = 0x50 as *const c_void;
            assert_eq!(
                crate::api_func::cudaFuncGetAttributes(std::ptr::null_mut(), kernel),
                invalid
            );
            assert_eq!(
                crate::api_launch::cudaLaunchKernelExC(
                    std::ptr::null(),
                    kernel,
                    std::ptr::null_mut()
                ),
                invalid
            );
        }
    }
}
