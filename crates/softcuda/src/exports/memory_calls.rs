//! The memory entry points (a part of [`super`]'s list kept apart for size): allocation, host
//! memory, pointer queries, copies and fills, and virtual memory management. Thin shims over
//! `memory`, `pointer`, `copy` and `vmm`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_uint, c_void};

use cudarc::driver::sys::{CUDA_MEMCPY2D, CUdeviceptr, CUresult, CUstream};

use super::handle_value;
use crate::abi::{self, p};
use crate::memory::{self, Kind};
use crate::{context, copy, pointer, vmm};

exports! {
    // ---- memory ----------------------------------------------------------------------------

    /// Allocates device memory in the current context.
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) {
        let ctx = context::live()?;
        if dptr.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `dptr` is cuMemAlloc_v2's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(dptr, memory::alloc(ctx.id, abi::bytes(size), Kind::Device)?) }
    }

    /// Frees device or managed memory, after the context's queued work has finished.
    fn cuMemFree_v2(dptr: CUdeviceptr) { pointer::free_device(dptr) }

    /// Page-locked host memory, visible to kernels at the same address.
    fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemAllocHost_v2: the
        // helper's contract.
        unsafe { abi::write_host_alloc(pp, size) }
    }

    /// Page-locked host memory; the flags (PORTABLE, DEVICEMAP, WRITECOMBINED) change nothing here.
    fn cuMemHostAlloc(pp: *mut *mut c_void, size: usize, flags: c_uint) {
        if flags & !0x7 != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemHostAlloc: the
        // helper's contract.
        unsafe { abi::write_host_alloc(pp, size) }
    }

    /// Page-locks the caller's host memory for the current context (it stays the caller's:
    /// unregistering or destroying the context forgets it, never frees it). Its pages must be
    /// readable and writable, or readable with READ_ONLY, as NVIDIA's pinning requires.
    /// PORTABLE and DEVICEMAP change nothing here; IOMEMORY is not supported.
    fn cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, Flags: c_uint) {
        if Flags & !0xF != 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        if Flags & 0x4 != 0 {
            return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
        }
        let ctx = context::live()?;
        memory::register(ctx.id, p.addr() as u64, bytesize as u64, Flags & 0x8 == 0)
    }

    /// Forgets a registration made by cuMemHostRegister (the memory stays the caller's); as on
    /// NVIDIA's driver, once no kernel of the device runs.
    fn cuMemHostUnregister(p: *mut c_void) {
        let ctx = context::live()?;
        crate::running::wait_idle(ctx.device);
        memory::unregister(p.addr() as u64)
    }

    /// Frees page-locked host memory.
    fn cuMemFreeHost(ptr: *mut c_void) {
        context::live()?;
        memory::free(ptr.addr() as u64, &[Kind::Host])
    }

    /// The device address of page-locked host memory: the same address.
    fn cuMemHostGetDevicePointer_v2(pdptr: *mut CUdeviceptr, ptr: *mut c_void, flags: c_uint) {
        // SAFETY: `pdptr` is cuMemHostGetDevicePointer_v2's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(pdptr, pointer::host_device_pointer(ptr.addr() as u64, flags)?) }
    }

    /// Managed memory (counted against device memory, usable from host and kernels).
    fn cuMemAllocManaged(dptr: *mut CUdeviceptr, size: usize, flags: c_uint) {
        let ctx = context::live()?;
        if dptr.is_null() || !(flags == 1 || flags == 2) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `dptr` is cuMemAllocManaged's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(dptr, memory::alloc(ctx.id, abi::bytes(size), Kind::Managed)?) }
    }

    /// Free and total device memory (total = `SOFTCUDA_MEMORY` or 16 GiB).
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemGetInfo_v2: the
        // helper's contract.
        unsafe { abi::write_mem_info(free, total) }
    }

    /// Base and size of the allocation containing `dptr`; either out-pointer may be NULL.
    fn cuMemGetAddressRange_v2(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemGetAddressRange_v2:
        // the helper's contract.
        unsafe { abi::write_address_range(pbase, psize, dptr) }
    }

    /// One attribute of a pointer (context, memory type, range, ordinal, ...).
    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_uint, ptr: CUdeviceptr) {
        if data.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        match pointer::attribute(attribute, ptr)? {
            // SAFETY: `data.cast::<u32>()` is cuPointerGetAttribute's out-pointer: NULL (refused)
            // or writable per cuda.h.
            pointer::Value::U32(v) => unsafe { abi::write(data.cast::<u32>(), v) },
            // SAFETY: `data.cast::<u64>()` is cuPointerGetAttribute's out-pointer: NULL (refused)
            // or writable per cuda.h.
            pointer::Value::U64(v) => unsafe { abi::write(data.cast::<u64>(), v) },
            // SAFETY: `data.cast::<*mut c_void>()` is cuPointerGetAttribute's out-pointer: NULL
            // (refused) or writable per cuda.h.
            pointer::Value::Ptr(v) => unsafe { abi::write(data.cast::<*mut c_void>(), p(v)) },
        }
    }

    // ---- copies and fills ------------------------------------------------------------------

    /// Host to device, synchronous.
    fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) { copy::htod(dst, src.cast(), n, None) }

    /// Device to host, synchronous.
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) { copy::dtoh(dst.cast(), src, n, None) }

    /// Device to device, synchronous.
    fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) { copy::dtod(dst, src, n, None) }

    /// Host to device on a stream.
    fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, hStream: CUstream) {
        copy::htod(dst, src.cast(), n, Some(handle_value(hStream)))
    }

    /// Device to host on a stream (synchronous into pageable memory, as NVIDIA's).
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, hStream: CUstream) {
        copy::dtoh(dst.cast(), src, n, Some(handle_value(hStream)))
    }

    /// Device to device on a stream.
    fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hStream: CUstream) {
        copy::dtod(dst, src, n, Some(handle_value(hStream)))
    }

    /// Unified-address copy: each side may be device or host memory.
    fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) { copy::any(dst, src, n, None) }

    /// Unified-address copy on a stream.
    fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, hStream: CUstream) {
        copy::any(dst, src, n, Some(handle_value(hStream)))
    }

    /// 2D copy between host, device and unified memory (CUDA arrays: not supported).
    fn cuMemcpy2D_v2(desc: *const CUDA_MEMCPY2D) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemcpy2D_v2: the
        // helper's contract.
        let (src, dst, w, rows) = unsafe { abi::read_2d(desc) }?;
        copy::copy_2d(&src, &dst, w, rows, None)
    }


    /// 2D copy on a stream.
    fn cuMemcpy2DAsync_v2(desc: *const CUDA_MEMCPY2D, hStream: CUstream) {
        // SAFETY: the pointers are NULL or valid as cuda.h documents for cuMemcpy2DAsync_v2: the
        // helper's contract.
        let (src, dst, w, rows) = unsafe { abi::read_2d(desc) }?;
        copy::copy_2d(&src, &dst, w, rows, Some(handle_value(hStream)))
    }

    /// Sets `n` bytes.
    fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) { copy::fill(dst, value.into(), 1, n, None) }

    /// Sets `n` 16-bit values (`dst` 2-byte aligned).
    fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) { copy::fill(dst, value.into(), 2, n, None) }

    /// Sets `n` 32-bit values (`dst` 4-byte aligned).
    fn cuMemsetD32_v2(dst: CUdeviceptr, value: c_uint, n: usize) { copy::fill(dst, value, 4, n, None) }

    /// [`cuMemsetD8_v2`] on a stream.
    fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, hStream: CUstream) {
        copy::fill(dst, value.into(), 1, n, Some(handle_value(hStream)))
    }

    /// [`cuMemsetD16_v2`] on a stream.
    fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, hStream: CUstream) {
        copy::fill(dst, value.into(), 2, n, Some(handle_value(hStream)))
    }

    /// [`cuMemsetD32_v2`] on a stream.
    fn cuMemsetD32Async(dst: CUdeviceptr, value: c_uint, n: usize, hStream: CUstream) {
        copy::fill(dst, value, 4, n, Some(handle_value(hStream)))
    }
}

// ---- virtual memory management (see `vmm`) -------------------------------------------------
exports! {
    /// The granularity of physical allocations and mappings (2 MiB, minimum and recommended).
    fn cuMemGetAllocationGranularity(granularity: *mut usize, prop: *const vmm::RawAllocationProp, option: c_uint) {
        // SAFETY: `prop` is cuMemGetAllocationGranularity's input: NULL (refused) or readable per
        // cuda.h.
        let prop = unsafe { abi::read(prop) }?;
        let g = vmm::granularity(&prop, option)?;
        // SAFETY: `granularity` is cuMemGetAllocationGranularity's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(granularity, g as usize) }
    }

    /// Reserves inaccessible address space (`size` and `addr` in whole host pages).
    fn cuMemAddressReserve(ptr: *mut CUdeviceptr, size: usize, alignment: usize, addr: CUdeviceptr, flags: u64) {
        if ptr.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `ptr` is cuMemAddressReserve's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(ptr, vmm::reserve(abi::bytes(size), abi::bytes(alignment), addr, flags)?) }
    }

    /// Frees a whole reservation with nothing mapped in it.
    fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) { vmm::address_free(ptr, abi::bytes(size)) }

    /// Creates physical device memory (a multiple of the granularity), not mapped anywhere.
    fn cuMemCreate(handle: *mut u64, size: usize, prop: *const vmm::RawAllocationProp, flags: u64) {
        if handle.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `prop` is cuMemCreate's input: NULL (refused) or readable per cuda.h.
        let prop = unsafe { abi::read(prop) }?;
        // SAFETY: `handle` is cuMemCreate's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(handle, vmm::create(abi::bytes(size), &prop, flags)?) }
    }

    /// Drops a reference to physical memory; it is freed once unmapped everywhere.
    fn cuMemRelease(handle: u64) { vmm::release(handle) }

    /// Maps physical memory into a reservation (inaccessible until cuMemSetAccess).
    fn cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: u64, flags: u64) {
        vmm::map(ptr, abi::bytes(size), abi::bytes(offset), handle, flags)
    }

    /// Unmaps whole mappings, after the kernels and copies using them have finished.
    fn cuMemUnmap(ptr: CUdeviceptr, size: usize) { vmm::unmap(ptr, abi::bytes(size)) }

    /// Sets the access of device 0 to a mapped range.
    fn cuMemSetAccess(ptr: CUdeviceptr, size: usize, desc: *const vmm::RawAccessDesc, count: usize) {
        if desc.is_null() || count == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and holding `count` descriptors: cuMemSetAccess's
        // contract.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        vmm::set_access(ptr, abi::bytes(size), descs)
    }

    /// The access flags of device 0 at a mapped address.
    fn cuMemGetAccess(flags: *mut u64, location: *const vmm::RawLocation, ptr: CUdeviceptr) {
        // SAFETY: `location` is cuMemGetAccess's input: NULL (refused) or readable per cuda.h.
        let location = unsafe { abi::read(location) }?;
        // SAFETY: `flags` is cuMemGetAccess's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(flags, vmm::get_access(&location, ptr)?) }
    }

    /// The handle mapped at `addr`, with one more reference (release it with cuMemRelease).
    fn cuMemRetainAllocationHandle(handle: *mut u64, addr: *mut c_void) {
        if handle.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `handle` is cuMemRetainAllocationHandle's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(handle, vmm::retain(addr.addr() as u64)?) }
    }

    /// The properties a handle was created with.
    fn cuMemGetAllocationPropertiesFromHandle(prop: *mut vmm::RawAllocationProp, handle: u64) {
        if prop.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `prop` is cuMemGetAllocationPropertiesFromHandle's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(prop, vmm::properties(handle)?) }
    }
}
