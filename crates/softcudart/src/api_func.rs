//! Exported entry points for kernel attributes and occupancy, each naming the kernel by its host
//! stub: `cudaFuncGetAttributes` (the function's `CU_FUNC_ATTRIBUTE_*` values in the current
//! context), `cudaFuncSetAttribute` (set on the kernel for this thread's device, as
//! `cuKernelSetAttribute` does, so it holds in every context of the device), and the occupancy
//! calls. `cudaOccupancyMaxPotentialBlockSize` and its variants are templates in NVIDIA's
//! cuda_runtime.h over `cudaFuncGetAttributes`, `cudaDeviceGetAttribute` and
//! `cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`: they need nothing more here.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it; NULL out-pointers
//! are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::context;
use crate::driver::{Driver, Handle, driver};
use crate::registry;
use crate::status::{Rt, api, check, code, put};

/// CUDA 13.0's `struct cudaFuncAttributes`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct FuncAttributes {
    shared_size_bytes: usize,
    const_size_bytes: usize,
    local_size_bytes: usize,
    max_threads_per_block: c_int,
    num_regs: c_int,
    ptx_version: c_int,
    binary_version: c_int,
    cache_mode_ca: c_int,
    max_dynamic_shared_size_bytes: c_int,
    preferred_shmem_carveout: c_int,
    cluster_dim_must_be_set: c_int,
    required_cluster_width: c_int,
    required_cluster_height: c_int,
    required_cluster_depth: c_int,
    cluster_scheduling_policy_preference: c_int,
    non_portable_cluster_size_allowed: c_int,
    reserved: [c_int; 16],
}

// Measured from CUDA 13.0's driver_types.h with a C compiler.
const _: () = assert!(std::mem::size_of::<FuncAttributes>() == 144);

/// The current context's function of the kernel whose host stub is `func`.
fn function(func: *const c_void) -> Result<(&'static Driver, Handle), Rt> {
    let kernel = registry::find_kernel(func)?;
    let d = context::current()?;
    let mut f: Handle = std::ptr::null_mut();
    // SAFETY: `f` is a valid out-pointer; the driver checks the kernel; a context is current.
    check(unsafe { (d.cuKernelGetFunction)(&mut f, kernel) })?;
    Ok((d, f))
}

/// One `CU_FUNC_ATTRIBUTE_*` of `f`.
fn attribute(d: &Driver, f: Handle, attr: c_int) -> Result<c_int, Rt> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer; `f` is a function of the current context.
    check(unsafe { (d.cuFuncGetAttribute)(&mut v, attr, f) })?;
    Ok(v)
}

/// The attributes of the kernel whose host stub is `func`.
pub(crate) unsafe extern "C" fn cudaFuncGetAttributes(
    attr: *mut FuncAttributes,
    func: *const c_void,
) -> c_int {
    api(|| {
        if attr.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let (d, f) = function(func)?;
        let get = |a| attribute(d, f, a);
        let bytes = |a| get(a).map(|v| usize::try_from(v).unwrap_or(0));
        // The cluster attributes (10 to 15) are 0 where a driver does not report them (softcuda
        // launches no clusters).
        let cluster = |a| get(a).unwrap_or(0);
        let a = FuncAttributes {
            max_threads_per_block: get(0)?,
            shared_size_bytes: bytes(1)?,
            const_size_bytes: bytes(2)?,
            local_size_bytes: bytes(3)?,
            num_regs: get(4)?,
            ptx_version: get(5)?,
            binary_version: get(6)?,
            cache_mode_ca: get(7)?,
            max_dynamic_shared_size_bytes: get(8)?,
            preferred_shmem_carveout: get(9)?,
            cluster_dim_must_be_set: cluster(10),
            required_cluster_width: cluster(11),
            required_cluster_height: cluster(12),
            required_cluster_depth: cluster(13),
            non_portable_cluster_size_allowed: cluster(14),
            cluster_scheduling_policy_preference: cluster(15),
            reserved: [0; 16],
        };
        // SAFETY: the contract above.
        unsafe { put(attr, a) }
    })
}

/// The settable `cudaFuncAttribute`s: max dynamic shared memory (8) to the cluster scheduling
/// preference (15), numbered as the driver's `CU_FUNC_ATTRIBUTE_*`.
const SETTABLE: std::ops::RangeInclusive<c_int> = 8..=15;

/// Sets an attribute of the kernel whose host stub is `func`, for this thread's device.
pub(crate) unsafe extern "C" fn cudaFuncSetAttribute(
    func: *const c_void,
    attr: c_int,
    value: c_int,
) -> c_int {
    api(|| {
        let kernel = registry::find_kernel(func)?;
        if !SETTABLE.contains(&attr) {
            return Err(code::INVALID_VALUE);
        }
        let d = driver()?;
        let dev = context::current_device_handle(d)?;
        // SAFETY: plain values; the driver checks the kernel and the value.
        check(unsafe { (d.cuKernelSetAttribute)(attr, value, kernel, dev) })
    })
}

/// Records a cache preference (`cudaFuncCache`, the driver's `CUfunc_cache` values) for the
/// kernel whose host stub is `func`, on this thread's device.
pub(crate) unsafe extern "C" fn cudaFuncSetCacheConfig(
    func: *const c_void,
    config: c_int,
) -> c_int {
    api(|| {
        let kernel = registry::find_kernel(func)?;
        let d = driver()?;
        let dev = context::current_device_handle(d)?;
        // SAFETY: plain values; the driver checks the kernel and the preference.
        check(unsafe { (d.cuKernelSetCacheConfig)(kernel, config, dev) })
    })
}

/// How many blocks of `block_size` threads with `dynamic` bytes of dynamic shared memory fit
/// on one multiprocessor.
fn max_active_blocks(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic: usize,
    flags: c_uint,
) -> Result<(), Rt> {
    if blocks.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let (d, f) = function(func)?;
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer; the driver checks the rest.
    check(unsafe {
        (d.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(
            &mut n, f, block_size, dynamic, flags,
        )
    })?;
    // SAFETY: the contract above.
    unsafe { put(blocks, n) }
}

/// Occupancy: active blocks per multiprocessor.
pub(crate) unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic: usize,
) -> c_int {
    api(|| max_active_blocks(blocks, func, block_size, dynamic, 0))
}

/// Occupancy with `cudaOccupancy*` flags (the driver's `CU_OCCUPANCY_*` values).
pub(crate) unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic: usize,
    flags: c_uint,
) -> c_int {
    api(|| max_active_blocks(blocks, func, block_size, dynamic, flags))
}

/// The dynamic shared memory each block can have when `blocks` blocks of `block_size` threads
/// share a multiprocessor.
pub(crate) unsafe extern "C" fn cudaOccupancyAvailableDynamicSMemPerBlock(
    size: *mut usize,
    func: *const c_void,
    blocks: c_int,
    block_size: c_int,
) -> c_int {
    api(|| {
        if size.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let (d, f) = function(func)?;
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer; the driver checks the rest.
        check(unsafe {
            (d.cuOccupancyAvailableDynamicSMemPerBlock)(&mut n, f, blocks, block_size)
        })?;
        // SAFETY: the contract above.
        unsafe { put(size, n) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_of_a_stub_never_registered_are_refused_before_any_driver_call() {
        let stub = 0x50 as *const c_void;
        let mut a = FuncAttributes::default();
        // SAFETY: a live struct to write; the stub is never read through.
        let r = unsafe { cudaFuncGetAttributes(&mut a, stub) };
        assert_eq!(r, code::INVALID_RESOURCE_HANDLE.0);
        // SAFETY: as above.
        let r = unsafe { cudaFuncSetAttribute(stub, 8, 1024) };
        assert_eq!(r, code::INVALID_RESOURCE_HANDLE.0);
    }
}
