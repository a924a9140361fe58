//! Device memory and copies: cuMemAlloc/Free, stream-ordered cuMemAllocAsync/FreeAsync,
//! cuMemcpy*, cuMemset*, managed memory and host registration.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUdeviceptr, CUmem_advise, CUmemLocation, CUstream};

use super::{DriverResult, ok};

/// cuMemAlloc_v2: `bytes` of device memory in the bound context.
///
/// # Safety
/// The caller's context is bound, and the caller frees the allocation once.
pub(crate) unsafe fn alloc(bytes: usize) -> DriverResult<CUdeviceptr> {
    let mut raw: CUdeviceptr = 0;
    // SAFETY: `raw` is a valid out pointer; context and ownership as the caller promises.
    ok("cuMemAlloc_v2", unsafe {
        sys::cuMemAlloc_v2(&mut raw, bytes)
    })?;
    Ok(raw)
}

/// cuMemFree_v2.
///
/// # Safety
/// `ptr` is the caller's allocation of the bound context, which nothing uses any more.
pub(crate) unsafe fn free(ptr: CUdeviceptr) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemFree_v2", unsafe { sys::cuMemFree_v2(ptr) })
}

/// cuMemAllocAsync: `bytes` from the device's current memory pool, in `stream`'s order.
///
/// # Safety
/// `stream` is a live stream of the bound context; the caller waits for the stream before any
/// other stream uses the memory, and frees the allocation once.
pub(crate) unsafe fn alloc_async(bytes: usize, stream: CUstream) -> DriverResult<CUdeviceptr> {
    let mut raw: CUdeviceptr = 0;
    // SAFETY: `raw` is a valid out pointer; stream and ownership as the caller promises.
    ok("cuMemAllocAsync", unsafe {
        sys::cuMemAllocAsync(&mut raw, bytes, stream)
    })?;
    Ok(raw)
}

/// cuMemFreeAsync: frees `ptr` in `stream`'s order.
///
/// # Safety
/// `ptr` is the caller's allocation of the bound context, which no work queued or running on
/// any stream uses any more; `stream` is a live stream of that context.
pub(crate) unsafe fn free_async(ptr: CUdeviceptr, stream: CUstream) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemFreeAsync", unsafe {
        sys::cuMemFreeAsync(ptr, stream)
    })
}

/// cuMemGetInfo_v2: (free, total) bytes of the bound context's device.
pub(crate) fn info() -> DriverResult<(usize, usize)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out pointers; without a bound context the driver answers an error code.
    ok("cuMemGetInfo_v2", unsafe {
        sys::cuMemGetInfo_v2(&mut free, &mut total)
    })?;
    Ok((free, total))
}

/// cuMemcpyHtoD_v2: copies `src` to `dst` (synchronous).
///
/// # Safety
/// `[dst, dst + src.len())` lies inside a live allocation of the bound context.
pub(crate) unsafe fn copy_htod(dst: CUdeviceptr, src: &[u8]) -> DriverResult {
    // SAFETY: src is readable for its length; dst as the caller promises (above).
    ok("cuMemcpyHtoD_v2", unsafe {
        sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len())
    })
}

/// cuMemcpyDtoH_v2: copies `dst.len()` bytes from `src` into `dst` (synchronous).
///
/// # Safety
/// `[src, src + dst.len())` lies inside a live allocation of the bound context.
pub(crate) unsafe fn copy_dtoh(dst: &mut [u8], src: CUdeviceptr) -> DriverResult {
    // SAFETY: dst is writable for its length; src as the caller promises (above).
    ok("cuMemcpyDtoH_v2", unsafe {
        sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len())
    })
}

/// cuMemcpyDtoD_v2: copies `len` bytes from `src` to `dst`.
///
/// # Safety
/// Both ranges lie inside live allocations of the bound context.
pub(crate) unsafe fn copy_dtod(dst: CUdeviceptr, src: CUdeviceptr, len: usize) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemcpyDtoD_v2", unsafe {
        sys::cuMemcpyDtoD_v2(dst, src, len)
    })
}

/// cuMemsetD8_v2: sets `len` bytes at `dst` to `value`, on the legacy default stream (it may
/// return before it is done).
///
/// # Safety
/// `[dst, dst + len)` is device-accessible memory of the bound context that nothing else uses
/// meanwhile.
pub(crate) unsafe fn set_d8(dst: CUdeviceptr, value: u8, len: usize) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemsetD8_v2", unsafe {
        sys::cuMemsetD8_v2(dst, value, len)
    })
}

/// cuMemsetD8Async: sets `len` bytes at `dst` to `value`, in `stream`'s order.
///
/// # Safety
/// `[dst, dst + len)` lies inside an allocation of the bound context that stays alive until
/// the stream has done it; `stream` is a live stream of that context.
pub(crate) unsafe fn set_d8_async(
    dst: CUdeviceptr,
    value: u8,
    len: usize,
    stream: CUstream,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemsetD8Async", unsafe {
        sys::cuMemsetD8Async(dst, value, len, stream)
    })
}

/// cuMemcpyHtoDAsync_v2: copies `len` bytes from host `src` to `dst`, in `stream`'s order.
///
/// # Safety
/// `src` is readable for `len` bytes until the copy is done (a pageable source is consumed
/// before the call returns; a registered one must stay alive until the stream has done it);
/// `[dst, dst + len)` lies inside an allocation of the bound context alive as long;
/// `stream` is a live stream of that context.
pub(crate) unsafe fn copy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    len: usize,
    stream: CUstream,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemcpyHtoDAsync_v2", unsafe {
        sys::cuMemcpyHtoDAsync_v2(dst, src, len, stream)
    })
}

/// cuMemcpyDtoHAsync_v2: copies `len` bytes from `src` to host `dst`, in `stream`'s order.
///
/// # Safety
/// `dst` is host memory writable for `len` bytes that nothing reads or frees until the stream
/// has done the copy (registered memory: until a fence or synchronize after it; pageable memory:
/// NVIDIA's driver fills it before returning, and a synchronize of `stream` covers any driver);
/// `[src, src + len)` lies inside an allocation of the bound context alive as long; `stream` is
/// a live stream of that context.
pub(crate) unsafe fn copy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    len: usize,
    stream: CUstream,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemcpyDtoHAsync_v2", unsafe {
        sys::cuMemcpyDtoHAsync_v2(dst, src, len, stream)
    })
}

/// cuMemcpyDtoDAsync_v2: copies `len` bytes from `src` to `dst`, in `stream`'s order.
///
/// # Safety
/// Both ranges lie inside allocations of the bound context that stay alive until the stream
/// has done it; `stream` is a live stream of that context.
pub(crate) unsafe fn copy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    len: usize,
    stream: CUstream,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemcpyDtoDAsync_v2", unsafe {
        sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream)
    })
}

/// cuMemAllocManaged with CU_MEM_ATTACH_GLOBAL: `bytes` of managed memory.
///
/// # Safety
/// The caller's context is current, and the caller frees the allocation once.
pub(crate) unsafe fn alloc_managed(bytes: usize) -> DriverResult<CUdeviceptr> {
    let mut p: CUdeviceptr = 0;
    // SAFETY: valid out pointer; context and ownership as the caller promises (above).
    ok("cuMemAllocManaged", unsafe {
        sys::cuMemAllocManaged(&mut p, bytes, 1 /* CU_MEM_ATTACH_GLOBAL */)
    })?;
    Ok(p)
}

/// cuMemAdvise_v2: a placement hint for `[ptr, ptr + len)`.
///
/// # Safety
/// The range lies inside the caller's managed allocation.
pub(crate) unsafe fn advise(
    ptr: CUdeviceptr,
    len: usize,
    advice: CUmem_advise,
    location: CUmemLocation,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above); advice is only a hint about placement.
    ok("cuMemAdvise_v2", unsafe {
        sys::cuMemAdvise_v2(ptr, len, advice, location)
    })
}

/// cuMemHostRegister_v2 (no flags): page-locks `[ptr, ptr + len)` for the bound context.
///
/// # Safety
/// The range is the caller's own memory, alive and not registered in the bound context, and
/// the caller unregisters it before freeing it (or finds its context dead).
pub(crate) unsafe fn host_register(ptr: *mut c_void, len: usize) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemHostRegister_v2", unsafe {
        sys::cuMemHostRegister_v2(ptr, len, 0)
    })
}

/// cuMemHostUnregister.
///
/// # Safety
/// `ptr` was registered in the bound context, and no copy uses it any more.
pub(crate) unsafe fn host_unregister(ptr: *mut c_void) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuMemHostUnregister", unsafe {
        sys::cuMemHostUnregister(ptr)
    })
}
