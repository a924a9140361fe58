//! Exported entry points for device and pinned host memory: allocation, copies and fills.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it (a copy's
//! pointers for `count` bytes, of the kind it names); NULL out-pointers, and NULL copy or fill
//! pointers with a non-zero count, are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::driver::Handle;
use crate::status::{Rt, api, check, code, put};
use crate::{context, registry};

/// `cudaMemcpyKind`.
const HOST_TO_HOST: c_int = 0;
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;
const DEVICE_TO_DEVICE: c_int = 3;
const DEFAULT: c_int = 4;

/// A `cudaMemcpyKind`, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    /// `cudaMemcpyDefault`: the addresses tell (unified addressing).
    Default,
}

/// The direction `kind` names; any other value is `cudaErrorInvalidMemcpyDirection`.
pub(crate) fn direction(kind: c_int) -> Result<Direction, Rt> {
    Ok(match kind {
        HOST_TO_HOST => Direction::HostToHost,
        HOST_TO_DEVICE => Direction::HostToDevice,
        DEVICE_TO_HOST => Direction::DeviceToHost,
        DEVICE_TO_DEVICE => Direction::DeviceToDevice,
        DEFAULT => Direction::Default,
        _ => return Err(code::INVALID_MEMCPY_DIRECTION),
    })
}

/// Allocates `size` bytes of device memory; 0 bytes is a NULL pointer and success.
pub(crate) unsafe extern "C" fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> c_int {
    api(|| {
        if ptr.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = context::current()?;
        let mut p = 0;
        if size > 0 {
            // SAFETY: `p` is a valid out-pointer; a context is current.
            check(unsafe { (d.cuMemAlloc_v2)(&mut p, size) })?;
        }
        // SAFETY: the contract above.
        unsafe { put(ptr, p as *mut c_void) }
    })
}

/// Frees device memory; NULL only initialises the context (the classic `cudaFree(0)`).
pub(crate) unsafe extern "C" fn cudaFree(ptr: *mut c_void) -> c_int {
    api(|| {
        let d = context::current()?;
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the driver checks that `ptr` is an allocation of this context.
        check(unsafe { (d.cuMemFree_v2)(ptr as u64) })
    })
}

/// Allocates managed memory, reachable from host and device at one address; `flags` is
/// `cudaMemAttachGlobal` (1) or `cudaMemAttachHost` (2), the driver's values. 0 bytes is
/// `cudaErrorInvalidValue`, as the runtime documents.
pub(crate) unsafe extern "C" fn cudaMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> c_int {
    api(|| {
        if ptr.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = context::current()?;
        let mut p = 0;
        // Zero bytes succeed with NULL, as cudaMalloc's do: NVIDIA's runtime 13 answered
        // cudaSuccess (runtime_semantics.cu on the H200, bench/h200-runs/2026-12-02-s12/).
        if size > 0 {
            // SAFETY: `p` is a valid out-pointer; the driver checks the flags.
            check(unsafe { (d.cuMemAllocManaged)(&mut p, size, flags) })?;
        }
        // SAFETY: the contract above.
        unsafe { put(ptr, p as *mut c_void) }
    })
}

/// Allocates page-locked host memory.
pub(crate) unsafe extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> c_int {
    // SAFETY: `ptr` is NULL or valid (the contract above); the closure's pointer is valid.
    api(|| unsafe {
        context::create(ptr, std::ptr::null_mut(), |d, p| {
            (d.cuMemAllocHost_v2)(p, size)
        })
    })
}

/// Allocates page-locked host memory with `cudaHostAlloc*` flags (the driver's
/// `CU_MEMHOSTALLOC_*` values).
pub(crate) unsafe extern "C" fn cudaHostAlloc(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> c_int {
    // SAFETY: `ptr` is NULL or valid (the contract above); the closure's pointer is valid; the
    // driver checks the flags.
    api(|| unsafe {
        context::create(ptr, std::ptr::null_mut(), |d, p| {
            (d.cuMemHostAlloc)(p, size, flags)
        })
    })
}

/// Frees page-locked host memory; NULL does nothing.
pub(crate) unsafe extern "C" fn cudaFreeHost(ptr: *mut c_void) -> c_int {
    api(|| {
        let d = context::current()?;
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the driver checks that `ptr` is its page-locked allocation.
        check(unsafe { (d.cuMemFreeHost)(ptr) })
    })
}

/// A copy of `count` bytes in the direction `kind`, on `stream` (`None`: the synchronous form).
fn copy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
    stream: Option<Handle>,
) -> Result<(), Rt> {
    direction(kind)?;
    let d = context::current()?;
    if count == 0 {
        return Ok(());
    }
    if dst.is_null() || src.is_null() {
        return Err(code::INVALID_VALUE);
    }
    let (dptr, sptr) = (dst as u64, src as u64);
    // SAFETY: `dst` and `src` are valid for `count` bytes of the kind named (the contract
    // above); the driver checks device addresses and the stream.
    let r = unsafe {
        match (kind, stream) {
            (HOST_TO_DEVICE, None) => (d.cuMemcpyHtoD_v2)(dptr, src, count),
            (DEVICE_TO_HOST, None) => (d.cuMemcpyDtoH_v2)(dst, sptr, count),
            (DEVICE_TO_DEVICE, None) => (d.cuMemcpyDtoD_v2)(dptr, sptr, count),
            (HOST_TO_DEVICE, Some(s)) => (d.cuMemcpyHtoDAsync_v2)(dptr, src, count, s),
            (DEVICE_TO_HOST, Some(s)) => (d.cuMemcpyDtoHAsync_v2)(dst, sptr, count, s),
            (DEVICE_TO_DEVICE, Some(s)) => (d.cuMemcpyDtoDAsync_v2)(dptr, sptr, count, s),
            // Host to host and "default" (the addresses tell): unified addressing.
            (_, None) => (d.cuMemcpy)(dptr, sptr, count),
            (_, Some(s)) => (d.cuMemcpyAsync)(dptr, sptr, count, s),
        }
    };
    check(r)
}

/// Copies `count` bytes, synchronously with respect to the host except device to device.
pub(crate) unsafe extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
) -> c_int {
    api(|| copy(dst, src, count, kind, None))
}

/// Copies `count` bytes on `stream`.
pub(crate) unsafe extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
    stream: Handle,
) -> c_int {
    api(|| copy(dst, src, count, kind, Some(stream)))
}

/// Sets `count` bytes of device memory to `value`'s low byte, on `stream` or synchronously.
fn fill(ptr: *mut c_void, value: c_int, count: usize, stream: Option<Handle>) -> Result<(), Rt> {
    let d = context::current()?;
    if count == 0 {
        return Ok(());
    }
    if ptr.is_null() {
        return Err(code::INVALID_VALUE);
    }
    // The runtime takes an int and uses its low byte, as memset does.
    let byte = value.to_le_bytes()[0];
    // SAFETY: plain values; the driver checks the device range and the stream.
    check(unsafe {
        match stream {
            None => (d.cuMemsetD8_v2)(ptr as u64, byte, count),
            Some(s) => (d.cuMemsetD8Async)(ptr as u64, byte, count, s),
        }
    })
}

/// Fills device memory.
pub(crate) unsafe extern "C" fn cudaMemset(ptr: *mut c_void, value: c_int, count: usize) -> c_int {
    api(|| fill(ptr, value, count, None))
}

/// Fills device memory on `stream`.
pub(crate) unsafe extern "C" fn cudaMemsetAsync(
    ptr: *mut c_void,
    value: c_int,
    count: usize,
    stream: Handle,
) -> c_int {
    api(|| fill(ptr, value, count, Some(stream)))
}

/// The device address of `count` bytes at `offset` in the variable `symbol`; a range beyond it
/// is `cudaErrorInvalidValue`.
fn symbol_range(symbol: *const c_void, offset: usize, count: usize) -> Result<u64, Rt> {
    let (ptr, size) = registry::variable(symbol)?;
    if offset.checked_add(count).is_none_or(|end| end > size) {
        return Err(code::INVALID_VALUE);
    }
    Ok(ptr + offset as u64)
}

/// A copy into a variable: `kind` is host to device, device to device or default.
fn to_symbol(
    symbol: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Option<Handle>,
) -> Result<(), Rt> {
    if ![HOST_TO_DEVICE, DEVICE_TO_DEVICE, DEFAULT].contains(&kind) {
        return Err(code::INVALID_MEMCPY_DIRECTION);
    }
    let dst = symbol_range(symbol, offset, count)?;
    copy(dst as *mut c_void, src, count, kind, stream)
}

/// A copy out of a variable: `kind` is device to host, device to device or default.
fn from_symbol(
    dst: *mut c_void,
    symbol: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Option<Handle>,
) -> Result<(), Rt> {
    if ![DEVICE_TO_HOST, DEVICE_TO_DEVICE, DEFAULT].contains(&kind) {
        return Err(code::INVALID_MEMCPY_DIRECTION);
    }
    let src = symbol_range(symbol, offset, count)?;
    copy(dst, src as *const c_void, count, kind, stream)
}

/// Copies `count` bytes into the `__device__`/`__constant__` variable `symbol` at `offset`.
pub(crate) unsafe extern "C" fn cudaMemcpyToSymbol(
    symbol: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
) -> c_int {
    api(|| to_symbol(symbol, src, count, offset, kind, None))
}

/// [`cudaMemcpyToSymbol`] on a stream.
pub(crate) unsafe extern "C" fn cudaMemcpyToSymbolAsync(
    symbol: *const c_void,
    src: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Handle,
) -> c_int {
    api(|| to_symbol(symbol, src, count, offset, kind, Some(stream)))
}

/// Copies `count` bytes out of the variable `symbol` from `offset`.
pub(crate) unsafe extern "C" fn cudaMemcpyFromSymbol(
    dst: *mut c_void,
    symbol: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
) -> c_int {
    api(|| from_symbol(dst, symbol, count, offset, kind, None))
}

/// [`cudaMemcpyFromSymbol`] on a stream.
pub(crate) unsafe extern "C" fn cudaMemcpyFromSymbolAsync(
    dst: *mut c_void,
    symbol: *const c_void,
    count: usize,
    offset: usize,
    kind: c_int,
    stream: Handle,
) -> c_int {
    api(|| from_symbol(dst, symbol, count, offset, kind, Some(stream)))
}

/// The device address of the variable `symbol`.
pub(crate) unsafe extern "C" fn cudaGetSymbolAddress(
    ptr: *mut *mut c_void,
    symbol: *const c_void,
) -> c_int {
    api(|| {
        if ptr.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let (p, _) = registry::variable(symbol)?;
        // SAFETY: the contract above.
        unsafe { put(ptr, p as *mut c_void) }
    })
}

/// The size in bytes of the variable `symbol`.
pub(crate) unsafe extern "C" fn cudaGetSymbolSize(
    size: *mut usize,
    symbol: *const c_void,
) -> c_int {
    api(|| {
        if size.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let (_, n) = registry::variable(symbol)?;
        // SAFETY: the contract above.
        unsafe { put(size, n) }
    })
}
