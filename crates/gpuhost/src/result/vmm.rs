//! Virtual memory management (guest arenas): address reservations, physical allocations and
//! their mappings, cuMemAddress*, cuMemCreate/Release, cuMemMap/Unmap/SetAccess.

use cudarc::driver::sys::{
    self, CUdeviceptr, CUmemAccessDesc, CUmemAllocationGranularity_flags, CUmemAllocationProp,
    CUmemGenericAllocationHandle,
};

use super::{DriverResult, ok};

/// cuMemGetAllocationGranularity for allocations of `prop`.
pub(crate) fn granularity(
    prop: &CUmemAllocationProp,
    flag: CUmemAllocationGranularity_flags,
) -> DriverResult<usize> {
    let mut granularity = 0usize;
    // SAFETY: valid out pointer; prop outlives the call.
    ok("cuMemGetAllocationGranularity", unsafe {
        sys::cuMemGetAllocationGranularity(&mut granularity, prop, flag)
    })?;
    Ok(granularity)
}

/// cuMemAddressReserve: `size` bytes of address space aligned to `align` (no hint, no flags).
///
/// # Safety
/// The caller's context is bound, and the caller frees the range once, with nothing mapped.
pub(crate) unsafe fn reserve(size: usize, align: usize) -> DriverResult<CUdeviceptr> {
    let mut base = 0;
    // SAFETY: valid out pointer; context and ownership as the caller promises (above).
    ok("cuMemAddressReserve", unsafe {
        sys::cuMemAddressReserve(&mut base, size, align, 0, 0)
    })?;
    Ok(base)
}

/// cuMemAddressFree.
///
/// # Safety
/// `[base, base + size)` is the caller's whole reservation, with nothing mapped in it.
pub(crate) unsafe fn free(base: CUdeviceptr, size: usize) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemAddressFree", unsafe {
        sys::cuMemAddressFree(base, size)
    })
}

/// cuMemCreate: `size` bytes of physical memory of `prop` (no flags).
///
/// # Safety
/// The caller's context is bound, and the caller releases the handle once.
pub(crate) unsafe fn create(
    size: usize,
    prop: &CUmemAllocationProp,
) -> DriverResult<CUmemGenericAllocationHandle> {
    let mut handle: CUmemGenericAllocationHandle = 0;
    // SAFETY: valid out pointer and property; ownership as the caller promises (above).
    ok("cuMemCreate", unsafe {
        sys::cuMemCreate(&mut handle, size, prop, 0)
    })?;
    Ok(handle)
}

/// cuMemRelease: drops one reference to a physical allocation.
///
/// # Safety
/// The reference is the caller's, released once.
pub(crate) unsafe fn release(handle: CUmemGenericAllocationHandle) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemRelease", unsafe { sys::cuMemRelease(handle) })
}

/// cuMemMap: maps `handle` at `[ptr, ptr + size)` (offset 0, no flags).
///
/// # Safety
/// The range lies in the caller's reservation, holds no mapping, and is aligned to the
/// granularity, as is `size`.
pub(crate) unsafe fn map(
    ptr: CUdeviceptr,
    size: usize,
    handle: CUmemGenericAllocationHandle,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemMap", unsafe {
        sys::cuMemMap(ptr, size, 0, handle, 0)
    })
}

/// cuMemUnmap.
///
/// # Safety
/// `[ptr, ptr + size)` is mappings the caller made, which nothing (no running kernel) uses.
pub(crate) unsafe fn unmap(ptr: CUdeviceptr, size: usize) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemUnmap", unsafe { sys::cuMemUnmap(ptr, size) })
}

/// cuMemSetAccess with one descriptor.
///
/// # Safety
/// `[ptr, ptr + size)` is mapped by the caller.
pub(crate) unsafe fn set_access(
    ptr: CUdeviceptr,
    size: usize,
    desc: &CUmemAccessDesc,
) -> DriverResult {
    // SAFETY: one descriptor, valid for the call; the range as the caller promises (above).
    ok("cuMemSetAccess", unsafe {
        sys::cuMemSetAccess(ptr, size, desc, 1)
    })
}

/// cuMemRetainAllocationHandle: the allocation mapped at `addr`, with a new reference the
/// caller must release (an address without a mapping is an error code).
///
/// # Safety
/// The caller releases the returned reference once.
pub(crate) unsafe fn retain_handle(
    addr: CUdeviceptr,
) -> DriverResult<CUmemGenericAllocationHandle> {
    let mut found: CUmemGenericAllocationHandle = 0;
    // SAFETY: a query; `found` is a valid out pointer and an address without a mapping is an
    // error code.
    ok("cuMemRetainAllocationHandle", unsafe {
        sys::cuMemRetainAllocationHandle(&mut found, addr as *mut _)
    })?;
    Ok(found)
}
