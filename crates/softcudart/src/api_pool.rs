//! Exported entry points for stream-ordered allocation: `cudaMallocAsync` / `cudaFreeAsync`
//! from the device's current pool, and the default pool's handle and attributes. A
//! `cudaMemPool_t` is the driver's `CUmemoryPool`, and `cudaMemPoolAttr` numbers are the
//! driver's `CU_MEMPOOL_ATTR_*` ones.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it (an attribute's
//! value is of the type the attribute names); NULL out-pointers are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_void};

use crate::context;
use crate::driver::{Handle, driver};
use crate::status::{Rt, api, check, code, put};

/// Allocates `size` bytes in stream order on `stream`.
pub(crate) unsafe extern "C" fn cudaMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    stream: Handle,
) -> c_int {
    // SAFETY: `ptr` is NULL or valid (the contract above); the closure's pointer is valid; the
    // driver checks the size and the stream.
    api(|| unsafe { context::create_address(ptr, |d, p| (d.cuMemAllocAsync)(p, size, stream)) })
}

/// Frees memory in stream order on `stream`.
pub(crate) unsafe extern "C" fn cudaFreeAsync(ptr: *mut c_void, stream: Handle) -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: the driver checks that `ptr` is an allocation it can free, and the stream.
        check(unsafe { (d.cuMemFreeAsync)(ptr as u64, stream) })
    })
}

/// The default memory pool of `device`.
pub(crate) unsafe extern "C" fn cudaDeviceGetDefaultMemPool(
    pool: *mut Handle,
    device: c_int,
) -> c_int {
    api(|| {
        if pool.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = driver()?;
        let dev = context::device_handle(d, device)?;
        let mut p: Handle = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; `dev` is a device from the driver.
        check(unsafe { (d.cuDeviceGetDefaultMemPool)(&mut p, dev) })?;
        // SAFETY: the contract above.
        unsafe { put(pool, p) }
    })
}

/// Reads or writes one attribute of `pool` through the driver call `call`.
fn pool_attribute(
    pool: Handle,
    attr: c_int,
    value: *mut c_void,
    call: fn(&crate::driver::Driver) -> unsafe extern "C" fn(Handle, c_int, *mut c_void) -> c_int,
) -> Result<(), Rt> {
    if value.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let d = driver()?;
    // SAFETY: `value` is valid for the attribute's type (the contract above); the driver checks
    // the pool and the attribute.
    check(unsafe { call(d)(pool, attr, value) })
}

/// Sets one attribute of a memory pool.
pub(crate) unsafe extern "C" fn cudaMemPoolSetAttribute(
    pool: Handle,
    attr: c_int,
    value: *mut c_void,
) -> c_int {
    api(|| pool_attribute(pool, attr, value, |d| d.cuMemPoolSetAttribute))
}

/// Reads one attribute of a memory pool.
pub(crate) unsafe extern "C" fn cudaMemPoolGetAttribute(
    pool: Handle,
    attr: c_int,
    value: *mut c_void,
) -> c_int {
    api(|| pool_attribute(pool, attr, value, |d| d.cuMemPoolGetAttribute))
}

/// Releases a pool's unused memory down to `keep` bytes.
pub(crate) unsafe extern "C" fn cudaMemPoolTrimTo(pool: Handle, keep: usize) -> c_int {
    api(|| {
        let d = driver()?;
        // SAFETY: plain values; the driver checks the pool.
        check(unsafe { (d.cuMemPoolTrimTo)(pool, keep) })
    })
}
