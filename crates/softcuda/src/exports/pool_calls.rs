//! The memory-pool entry points (a part of [`super`]'s list kept apart for size): stream-ordered
//! allocation and the pools it draws from. Thin shims over `pool` and `pointer`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::c_void;

use cudarc::driver::sys::{CUdevice, CUdeviceptr, CUresult, CUstream};

use super::handle_value;
use crate::abi::{self, CuResult, p};
use crate::pool::{self, Props, Value};
use crate::{pointer, vmm};

/// `CUmemPoolProps` (CUDA 12.6+ layout; older headers have the same fields up to `maxSize`
/// and reserved bytes after), with enum fields as raw integers (a value from C outside a Rust
/// enum would be undefined behaviour).
#[repr(C)]
pub struct RawPoolProps {
    /// `CUmemAllocationType`.
    pub alloc_type: u32,
    /// `CUmemAllocationHandleType`.
    pub handle_types: u32,
    /// `CUmemLocation::type`.
    pub location_type: u32,
    /// `CUmemLocation::id`.
    pub location_id: i32,
    /// Windows only.
    pub win32_security_attributes: *mut c_void,
    /// Most bytes the pool may reserve (0: no limit).
    pub max_size: usize,
    /// `CU_MEM_POOL_CREATE_USAGE_*` flags.
    pub usage: u16,
    /// Must be zero.
    pub reserved: [u8; 54],
}

/// Reads a `CUmemPoolProps` (cuMemPoolCreate's, or a graph allocation node's `poolProps`);
/// NULL or non-zero reserved bytes are `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `props` is null or points to a readable `CUmemPoolProps`.
pub(crate) unsafe fn read_pool_props(props: *const RawPoolProps) -> CuResult<Props> {
    if props.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: `props` is non-null (checked) and readable (caller contract); each field is read
    // through a raw place, never as a reference to the whole struct.
    let (props, reserved) = unsafe {
        (
            Props {
                alloc_type: (&raw const (*props).alloc_type).read(),
                handle_types: (&raw const (*props).handle_types).read(),
                location_type: (&raw const (*props).location_type).read(),
                location_id: (&raw const (*props).location_id).read(),
                max_size: abi::bytes((&raw const (*props).max_size).read()),
                usage: (&raw const (*props).usage).read(),
            },
            (&raw const (*props).reserved).read(),
        )
    };
    if reserved.iter().any(|&b| b != 0) {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Ok(props)
}

/// `props` as the `CUmemPoolProps` a caller reads back (cuGraphMemAllocNodeGetParams).
pub(crate) fn raw_pool_props(props: &Props) -> RawPoolProps {
    RawPoolProps {
        alloc_type: props.alloc_type,
        handle_types: props.handle_types,
        location_type: props.location_type,
        location_id: props.location_id,
        win32_security_attributes: std::ptr::null_mut(),
        max_size: usize::try_from(props.max_size).unwrap_or(usize::MAX),
        usage: props.usage,
        reserved: [0; 54],
    }
}

exports! {
    /// Stream-ordered allocation from the current pool of the stream's device: the memory is
    /// usable by all work ordered after this call.
    fn cuMemAllocAsync(dptr: *mut CUdeviceptr, size: usize, hStream: CUstream) {
        if dptr.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let addr = pointer::alloc_async(handle_value(hStream), None, abi::bytes(size))?;
        // SAFETY: `dptr` is cuMemAllocAsync's out-pointer: non-null (checked) and writable per
        // cuda.h.
        unsafe { abi::write(dptr, addr) }
    }

    /// Stream-ordered allocation from `pool`.
    fn cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, size: usize, pool: *mut c_void, hStream: CUstream) {
        if dptr.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let addr = pointer::alloc_async(handle_value(hStream), Some(handle_value(pool)), abi::bytes(size))?;
        // SAFETY: `dptr` is cuMemAllocFromPoolAsync's out-pointer: non-null (checked) and
        // writable per cuda.h.
        unsafe { abi::write(dptr, addr) }
    }

    /// Stream-ordered free: checked now (a second free, or a pointer no allocator handed out,
    /// is `CUDA_ERROR_INVALID_VALUE`), released when the stream reaches this point.
    fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) { pointer::free_async(dptr, handle_value(hStream)) }

    /// The device's default memory pool.
    fn cuDeviceGetDefaultMemPool(pool_out: *mut *mut c_void, dev: CUdevice) {
        let h = pool::default_pool(dev)?;
        // SAFETY: `pool_out` is cuDeviceGetDefaultMemPool's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(pool_out, p(h)) }
    }

    /// The pool cuMemAllocAsync uses on the device.
    fn cuDeviceGetMemPool(pool_out: *mut *mut c_void, dev: CUdevice) {
        let h = pool::current_pool(dev)?;
        // SAFETY: `pool_out` is cuDeviceGetMemPool's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(pool_out, p(h)) }
    }

    /// Makes `pool` (one of the device's) the pool cuMemAllocAsync uses there.
    fn cuDeviceSetMemPool(dev: CUdevice, pool: *mut c_void) { pool::set_current_pool(dev, handle_value(pool)) }

    /// Creates a pool of device memory.
    fn cuMemPoolCreate(pool_out: *mut *mut c_void, props: *const RawPoolProps) {
        if pool_out.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `props` is NULL or a readable CUmemPoolProps per cuda.h: read_pool_props's
        // contract.
        let props = unsafe { read_pool_props(props) }?;
        let h = pool::create(&props)?;
        // SAFETY: `pool_out` is cuMemPoolCreate's out-pointer: non-null (checked) and writable
        // per cuda.h.
        unsafe { abi::write(pool_out, p(h)) }
    }

    /// Destroys a pool (not a device's default one); its outstanding allocations stay valid.
    fn cuMemPoolDestroy(pool: *mut c_void) { pool::destroy(handle_value(pool)) }

    /// Sets devices' access to the pool (recorded; every device sees pool memory in softcuda).
    fn cuMemPoolSetAccess(pool: *mut c_void, map: *const vmm::RawAccessDesc, count: usize) {
        if count == 0 {
            return pool::set_access(handle_value(pool), &[]);
        }
        if map.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and holding `count` descriptors: cuMemPoolSetAccess's
        // contract.
        let descs = unsafe { std::slice::from_raw_parts(map, count) };
        let descs: Vec<pool::Access> = descs
            .iter()
            .map(|d| pool::Access { location_type: d.location.kind, device: d.location.id, flags: d.flags })
            .collect();
        pool::set_access(handle_value(pool), &descs)
    }

    /// The access a device has to the pool (`CUmemAccess_flags`).
    fn cuMemPoolGetAccess(flags: *mut u32, pool: *mut c_void, location: *const vmm::RawLocation) {
        // SAFETY: `location` is cuMemPoolGetAccess's input: NULL (refused) or readable per cuda.h.
        let location = unsafe { abi::read(location) }?;
        let v = pool::access(handle_value(pool), location.kind, location.id)?;
        // SAFETY: `flags` is cuMemPoolGetAccess's out-pointer (a `CUmemAccess_flags`): NULL
        // (refused) or writable per cuda.h.
        unsafe { abi::write(flags, v) }
    }

    /// Gives back the pool's unused memory until about `minBytesToKeep` stay reserved.
    fn cuMemPoolTrimTo(pool: *mut c_void, minBytesToKeep: usize) {
        pool::trim(handle_value(pool), abi::bytes(minBytesToKeep))
    }

    /// Sets a `CUmemPool_attribute`: `int` for the reuse flags, `cuuint64_t` for the others.
    fn cuMemPoolSetAttribute(pool: *mut c_void, attr: u32, value: *mut c_void) {
        let v = if pool::is_int_attribute(attr)? {
            // SAFETY: `value` is NULL (refused) or points to this attribute's C type, an `int`.
            Value::Int(unsafe { abi::read(value.cast::<i32>()) }?)
        } else {
            // SAFETY: `value` is NULL (refused) or points to this attribute's C type, a
            // `cuuint64_t`.
            Value::U64(unsafe { abi::read(value.cast::<u64>()) }?)
        };
        pool::set_attribute(handle_value(pool), attr, v)
    }

    /// Reads a `CUmemPool_attribute` into an `int` or a `cuuint64_t`, as the attribute's type is.
    fn cuMemPoolGetAttribute(pool: *mut c_void, attr: u32, value: *mut c_void) {
        match pool::attribute(handle_value(pool), attr)? {
            // SAFETY: `value` is NULL (refused) or points to this attribute's C type, an `int`.
            Value::Int(v) => unsafe { abi::write(value.cast::<i32>(), v) },
            // SAFETY: `value` is NULL (refused) or points to this attribute's C type, a
            // `cuuint64_t`.
            Value::U64(v) => unsafe { abi::write(value.cast::<u64>(), v) },
        }
    }
}
