//! The one list of C entry points: every function softcuda exports under its `cuda.h` name.
//!
//! Each export is a thin shim: it checks the caller's pointers, calls safe Rust in a driver-object
//! module, and turns the `Result` into a `CUresult` inside [`crate::abi::guard`], which also turns
//! a panic into `CUDA_ERROR_UNKNOWN`. Enum parameters arrive as `c_uint` / `c_int`, never as the
//! Rust enum: a value from C outside the enum would be undefined behaviour in Rust.
//!
//! The functions are `pub` so the rlib's tests can call the C ABI directly; they are `unsafe`
//! because they take raw pointers from C.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint};

use cudarc::driver::sys::{CUdevice, CUresult, CUuuid};

use crate::abi::{self, CuResult};
use crate::{device, driver, errors};

/// Declares exports whose bodies return `CuResult<()>`.
///
/// SAFETY (for the `unsafe` block each expansion wraps its body in): the body only touches raw
/// pointers the C caller passed, through the null-checking helpers in `abi`, under the caller's
/// `cuda.h` contract that each non-null pointer is valid for the access the function documents.
macro_rules! exports {
    ($( $(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block )*) => {
        $(
            $(#[$meta])*
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
                abi::guard(|| -> CuResult<()> {
                    // SAFETY: see the macro's documentation: pointers are valid per cuda.h.
                    #[allow(unused_unsafe)]
                    unsafe { $body }
                })
            }
        )*
    };
}

/// Identifies softcuda to [`crate::loader`]: NVIDIA's libcuda has no such symbol.
#[unsafe(no_mangle)]
pub extern "C" fn softcuda_abi_version() -> c_uint {
    1
}

/// Copies `text` NUL-terminated into a C buffer of `len` bytes, truncating.
unsafe fn copy_c_string(text: &str, out: *mut c_char, len: c_int) -> CuResult<()> {
    let len = abi::non_negative(len)? as usize;
    if out.is_null() || len == 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let n = text.len().min(len - 1);
    // SAFETY: `out` is valid for `len` bytes (caller contract) and n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), out, n);
        out.add(n).write(0);
    }
    Ok(())
}

exports! {
    /// Initialises the driver; required before any other call except version and error queries.
    fn cuInit(flags: c_uint) { driver::init(flags) }

    /// Reports the CUDA version this driver implements (12080).
    fn cuDriverGetVersion(version: *mut c_int) { abi::write(version, driver::DRIVER_VERSION) }

    /// Number of devices: always 1.
    fn cuDeviceGetCount(count: *mut c_int) {
        driver::ensure_init()?;
        abi::write(count, 1)
    }

    /// The device handle for `ordinal` (only 0 exists).
    fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) {
        device::check(ordinal)?;
        abi::write(dev, ordinal)
    }

    /// The device name, NUL-terminated and truncated to `len`.
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) {
        device::check(dev)?;
        copy_c_string(device::NAME, name, len)
    }

    /// One device attribute; unknown attributes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_uint, dev: CUdevice) {
        device::check(dev)?;
        let v = device::attribute(attrib)?;
        abi::write(value, v)
    }

    /// Total device memory in bytes (`SOFTCUDA_MEMORY` or 16 GiB).
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) {
        device::check(dev)?;
        abi::write(bytes, usize::try_from(driver::total_memory()).unwrap_or(usize::MAX))
    }

    /// Pre-`_v2` name of [`cuDeviceTotalMem_v2`].
    fn cuDeviceTotalMem(bytes: *mut usize, dev: CUdevice) {
        device::check(dev)?;
        abi::write(bytes, usize::try_from(driver::total_memory()).unwrap_or(usize::MAX))
    }

    /// The device's UUID.
    fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) {
        device::check(dev)?;
        abi::write(uuid, CUuuid { bytes: device::uuid().map(|b| b as c_char) })
    }

    /// The device's UUID (same as [`cuDeviceGetUuid`]: there is no MIG).
    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) {
        device::check(dev)?;
        abi::write(uuid, CUuuid { bytes: device::uuid().map(|b| b as c_char) })
    }

    /// The name of a `CUresult` as a static C string; unknown codes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorName(error: c_uint, out: *mut *const c_char) {
        match errors::name(error) {
            Some(name) => abi::write(out, name.as_ptr()),
            None => {
                // NVIDIA sets the out-pointer to NULL for an unknown code.
                if !out.is_null() {
                    abi::write(out, std::ptr::null())?;
                }
                Err(CUresult::CUDA_ERROR_INVALID_VALUE)
            }
        }
    }

    /// The message of a `CUresult` as a static C string; unknown codes are `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorString(error: c_uint, out: *mut *const c_char) {
        match errors::message(error) {
            Some(msg) => abi::write(out, msg.as_ptr()),
            None => {
                if !out.is_null() {
                    abi::write(out, std::ptr::null())?;
                }
                Err(CUresult::CUDA_ERROR_INVALID_VALUE)
            }
        }
    }
}
