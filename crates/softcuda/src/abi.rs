//! Helpers for the C boundary: turning a `Result` into a `CUresult`, catching panics so that none
//! unwinds into C, checked writes through the caller's out-pointers, and the bodies of the few
//! exports that need more than one pointer handled (memcpy2D descriptors, address ranges, ...).

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::driver::sys::{CUDA_MEMCPY2D, CUdeviceptr, CUoccupancyB2DSize, CUresult};

use crate::copy::Side2D;
use crate::{context, memory, module, pointer};

/// The driver's error type: the `CUresult` code a C caller will see.
pub(crate) type CuResult<T> = Result<T, CUresult>;

/// Runs an export's body; a panic becomes `CUDA_ERROR_UNKNOWN` instead of unwinding into C.
pub(crate) fn guard(body: impl FnOnce() -> CuResult<()>) -> CUresult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUresult::CUDA_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => CUresult::CUDA_ERROR_UNKNOWN,
    }
}

/// Writes `value` through the caller's out-pointer; null is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `ptr` is null or valid for writing a `T` (the export's C contract).
pub(crate) unsafe fn write<T>(ptr: *mut T, value: T) -> CuResult<()> {
    if ptr.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null, and valid for a T by the caller's contract; write() skips dropping the
    // old (possibly uninitialised) contents.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Reads the `T` a C caller passed by pointer; null is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `ptr` is null or valid for reading a `T` (the export's C contract).
pub(crate) unsafe fn read<T: Copy>(ptr: *const T) -> CuResult<T> {
    if ptr.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null, and valid for reading a T by the caller's contract.
    Ok(unsafe { ptr.read() })
}

/// Converts a C `int` ordinal or count that must not be negative.
pub(crate) fn non_negative(value: i32) -> CuResult<u32> {
    u32::try_from(value).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// A handle value as the opaque pointer type cuda.h uses; it is never dereferenced.
pub(crate) fn p<T>(value: u64) -> *mut T {
    std::ptr::without_provenance_mut(value as usize)
}

/// A `size_t` count from C as bytes; sizes beyond the address space are invalid.
pub(crate) fn bytes(n: usize) -> u64 {
    n as u64
}

/// cuMemAllocHost's body: page-locked memory written to `pp`.
///
/// # Safety
/// `pp` is null or writable.
pub(crate) unsafe fn write_host_alloc(pp: *mut *mut c_void, size: usize) -> CuResult<()> {
    if pp.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let addr = pointer::alloc_host(bytes(size))?;
    // SAFETY: `pp` is non-null and writable (caller contract).
    unsafe { write(pp, p(addr)) }
}

/// cuMemGetInfo's body.
///
/// # Safety
/// Both pointers are null or writable.
pub(crate) unsafe fn write_mem_info(free: *mut usize, total: *mut usize) -> CuResult<()> {
    context::live()?;
    let (f, t) = memory::info();
    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    // SAFETY: null-checked by abi::write; writable by the caller's contract.
    unsafe {
        write(free, size(f))?;
        write(total, size(t))
    }
}

/// cuMemGetAddressRange's body: either out-pointer may be NULL.
///
/// # Safety
/// Both pointers are null or writable.
pub(crate) unsafe fn write_address_range(
    pbase: *mut CUdeviceptr,
    psize: *mut usize,
    dptr: CUdeviceptr,
) -> CuResult<()> {
    let (base, len) = pointer::address_range(dptr)?;
    // SAFETY: each pointer is written only when non-null; writable by the caller's contract.
    unsafe {
        if !pbase.is_null() {
            write(pbase, base)?;
        }
        if !psize.is_null() {
            write(psize, usize::try_from(len).unwrap_or(usize::MAX))?;
        }
    }
    Ok(())
}

/// The `CUDA_MEMCPY2D` fields as plain values; the memory-type enums are read as raw integers
/// because a foreign value outside the Rust enum would be undefined behaviour.
///
/// # Safety
/// `desc` is null or points to a readable `CUDA_MEMCPY2D`.
pub(crate) unsafe fn read_2d(
    desc: *const CUDA_MEMCPY2D,
) -> CuResult<(Side2D, Side2D, usize, usize)> {
    if desc.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: `desc` is non-null and readable; each field is read through a raw place without
    // forming a reference to the whole struct, and the enum fields as their u32 representation.
    unsafe {
        let src = Side2D {
            memory_type: (&raw const (*desc).srcMemoryType).cast::<u32>().read(),
            addr: 0,
            x: (&raw const (*desc).srcXInBytes).read(),
            y: (&raw const (*desc).srcY).read(),
            pitch: (&raw const (*desc).srcPitch).read(),
        };
        let dst = Side2D {
            memory_type: (&raw const (*desc).dstMemoryType).cast::<u32>().read(),
            addr: 0,
            x: (&raw const (*desc).dstXInBytes).read(),
            y: (&raw const (*desc).dstY).read(),
            pitch: (&raw const (*desc).dstPitch).read(),
        };
        let src_host = (&raw const (*desc).srcHost).read().addr() as u64;
        let dst_host = (&raw const (*desc).dstHost).read().addr() as u64;
        let src_dev = (&raw const (*desc).srcDevice).read();
        let dst_dev = (&raw const (*desc).dstDevice).read();
        let pick = |side: Side2D, host: u64, dev: u64| Side2D {
            addr: if side.memory_type == 1 { host } else { dev },
            ..side
        };
        Ok((
            pick(src, src_host, src_dev),
            pick(dst, dst_host, dst_dev),
            (&raw const (*desc).WidthInBytes).read(),
            (&raw const (*desc).Height).read(),
        ))
    }
}

/// Copies `text` NUL-terminated into a C buffer of `len` bytes, truncating.
pub(crate) unsafe fn copy_c_string(text: &str, out: *mut c_char, len: c_int) -> CuResult<()> {
    let len = non_negative(len)? as usize;
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

/// cuOccupancyMaxPotentialBlockSize's body.
///
/// # Safety
/// The out-pointers are null or writable; `b2d`, if given, is callable with a block size.
pub(crate) unsafe fn write_potential_block_size(
    grid: *mut c_int,
    block: *mut c_int,
    func: u64,
    b2d: CUoccupancyB2DSize,
    dynamic: usize,
    limit: c_int,
) -> CuResult<()> {
    if grid.is_null() || block.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    let smem_for = |bs: u32| match b2d {
        // SAFETY: the caller's callback maps a block size to bytes (cuda.h contract).
        Some(f) => unsafe { f(bs as c_int) },
        None => dynamic,
    };
    let (g, b) = module::potential_block_size(func, &smem_for, limit)?;
    // SAFETY: both pointers are non-null and writable.
    unsafe {
        write(grid, g)?;
        write(block, b)
    }
}
