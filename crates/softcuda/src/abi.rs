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

thread_local! {
    /// Whether this thread is running a host function or stream callback (`in_host_call`).
    static IN_HOST_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's `flag` set, and puts its previous value back however `f` ends
/// (a panic included): the scope of a mode the exports ask about.
pub(crate) fn with_flag<R>(
    flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>,
    f: impl FnOnce() -> R,
) -> R {
    /// Puts the flag's previous value back.
    struct Restore(&'static std::thread::LocalKey<std::cell::Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    let _restore = Restore(flag, flag.replace(true));
    f()
}

/// Runs `call`, a host function or stream callback, with every export refused on this thread
/// meanwhile: cuda.h forbids driver calls there (NVIDIA's driver may answer
/// `CUDA_ERROR_NOT_PERMITTED`), and here one could deadlock, since a stream's work can run
/// inline under its context's submit lock (a closed stream's).
pub(crate) fn in_host_call(call: impl FnOnce()) {
    with_flag(&IN_HOST_CALL, call);
}

/// Runs an export's body; a panic becomes `CUDA_ERROR_UNKNOWN` instead of unwinding into C.
/// Inside a host function it is refused (see [`in_host_call`]).
pub(crate) fn guard(body: impl FnOnce() -> CuResult<()>) -> CUresult {
    if IN_HOST_CALL.get() {
        return CUresult::CUDA_ERROR_NOT_PERMITTED;
    }
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
        let src_array = (&raw const (*desc).srcArray).read().addr() as u64;
        let dst_array = (&raw const (*desc).dstArray).read().addr() as u64;
        let pick = |side: Side2D, host: u64, dev: u64, array: u64| Side2D {
            addr: match side.memory_type {
                crate::copy::MEMORYTYPE_HOST => host,
                crate::copy::MEMORYTYPE_ARRAY => array,
                _ => dev,
            },
            ..side
        };
        Ok((
            pick(src, src_host, src_dev, src_array),
            pick(dst, dst_host, dst_dev, dst_array),
            (&raw const (*desc).WidthInBytes).read(),
            (&raw const (*desc).Height).read(),
        ))
    }
}

/// Copies `text` NUL-terminated into a C buffer of `len` bytes, truncating; a NULL buffer or a
/// length below 1 is `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `out` is null or valid for writing `len` bytes.
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

/// The file a loader call names (cuModuleLoad, cuLinkAddFile, cuLibraryLoadFromFile): its path
/// and its bytes with a NUL appended, so PTX text in it is a C string. A NULL or non-UTF-8 path
/// is `CUDA_ERROR_INVALID_VALUE`, a file that cannot be read `CUDA_ERROR_FILE_NOT_FOUND`.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub(crate) unsafe fn read_image_file(path: *const c_char) -> CuResult<(String, Vec<u8>)> {
    if path.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null (checked above) and NUL-terminated (caller contract).
    let path = unsafe { std::ffi::CStr::from_ptr(path) }
        .to_str()
        .map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let mut bytes = std::fs::read(path).map_err(|_| CUresult::CUDA_ERROR_FILE_NOT_FOUND)?;
    bytes.push(0);
    Ok((path.to_owned(), bytes))
}

/// A symbol name a C caller passed (a kernel or global to look up): NULL is
/// `CUDA_ERROR_INVALID_VALUE`; a name that is not UTF-8 names nothing PTX can declare, so it is
/// `CUDA_ERROR_NOT_FOUND`.
///
/// # Safety
/// `name` is null or a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn symbol_name<'a>(name: *const c_char) -> CuResult<&'a str> {
    if name.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null (checked above), NUL-terminated and alive for 'a (caller contract).
    unsafe { std::ffi::CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| CUresult::CUDA_ERROR_NOT_FOUND)
}

/// Writes a global's address and size where the caller asked for them; either pointer may be
/// NULL (cuModuleGetGlobal, cuLibraryGetGlobal).
///
/// # Safety
/// Each pointer is null or valid for writing its value.
pub(crate) unsafe fn write_global(
    dptr: *mut CUdeviceptr,
    size: *mut usize,
    (addr, len): (u64, u64),
) -> CuResult<()> {
    if !dptr.is_null() {
        // SAFETY: non-null and writable (caller contract).
        unsafe { write(dptr, addr) }?;
    }
    if !size.is_null() {
        // SAFETY: non-null and writable (caller contract).
        unsafe { write(size, usize::try_from(len).unwrap_or(usize::MAX)) }?;
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

/// `CUexecAffinityParam` with its enum field as a raw integer (a value from C outside the Rust
/// enum would be undefined behaviour); the union holds one `unsigned int` (the SM count).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawExecAffinityParam {
    /// `CUexecAffinityType` (0: SM count).
    pub kind: u32,
    /// `param.smCount.val`.
    pub value: u32,
}

/// `CUctxCreateParams` (cuda.h 12.5+): execution affinity or CIG parameters, or neither.
#[repr(C)]
pub struct RawCtxCreateParams {
    /// Array of `numExecAffinityParams` affinity parameters.
    pub exec_affinity: *mut RawExecAffinityParam,
    /// Length of `exec_affinity`.
    pub num_exec_affinity: c_int,
    /// `CUctxCigParam*`: a graphics-shared context (Windows D3D12 only on NVIDIA).
    pub cig: *mut c_void,
}

/// Checks cuCtxCreate_v3's affinity list. An empty list creates a plain context; a malformed one
/// is `CUDA_ERROR_INVALID_VALUE`; a well-formed SM-count affinity cannot be honoured by a CPU.
///
/// # Safety
/// `params` is null or valid for reading `num` entries.
pub(crate) unsafe fn check_exec_affinity(
    params: *const RawExecAffinityParam,
    num: c_int,
) -> CuResult<()> {
    let num = non_negative(num)? as usize;
    if num == 0 {
        return Ok(());
    }
    if params.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    for i in 0..num {
        // SAFETY: `params` is non-null and valid for `num` entries (caller contract).
        let param = unsafe { params.add(i).read() };
        if param.kind != 0 || param.value == 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
    }
    Err(CUresult::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY)
}

/// Checks cuCtxCreate_v4's parameters: NULL or a zeroed struct is a plain context; affinity and
/// CIG together are `CUDA_ERROR_INVALID_VALUE` (cuda.h: at most one may be set).
///
/// # Safety
/// `params` is null or points to a readable `CUctxCreateParams` whose affinity array is valid
/// for its count.
pub(crate) unsafe fn check_ctx_create_params(params: *const RawCtxCreateParams) -> CuResult<()> {
    if params.is_null() {
        return Ok(());
    }
    // SAFETY: non-null and readable (caller contract); read field by field through raw places.
    let (affinity, num, cig) = unsafe {
        (
            (&raw const (*params).exec_affinity).read(),
            (&raw const (*params).num_exec_affinity).read(),
            (&raw const (*params).cig).read(),
        )
    };
    let wants_affinity = num != 0 || !affinity.is_null();
    if wants_affinity && !cig.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    if !cig.is_null() {
        return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
    }
    if num == 0 && !affinity.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: forwarded caller contract.
    unsafe { check_exec_affinity(affinity, num) }
}

/// cuGetProcAddress's body (both versions): `*pfn` is written on every path that gets past the
/// argument checks (NULL when not found), and `status` when non-null.
///
/// # Safety
/// `symbol` is null or NUL-terminated; `pfn` and `status` are null or writable.
pub(crate) unsafe fn write_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut std::ffi::c_uint,
) -> CuResult<()> {
    if symbol.is_null() || pfn.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let name = unsafe { std::ffi::CStr::from_ptr(symbol) };
    let (f, st, result) = match crate::procaddr::get(name, version, flags) {
        Ok(f) => (f, crate::procaddr::Status::Found, Ok(())),
        // Found but newer than the version asked for: NULL, the status says why, and the call
        // itself succeeds (NVIDIA's driver 580 answers CUDA_SUCCESS).
        Err((st @ crate::procaddr::Status::VersionNotSufficient, _)) => {
            (std::ptr::null_mut(), st, Ok(()))
        }
        Err((st, code)) => (std::ptr::null_mut(), st, Err(code)),
    };
    // SAFETY: `pfn` is non-null and writable; `status` is written only when non-null.
    unsafe {
        write(pfn, f)?;
        if !status.is_null() {
            write(status, st as std::ffi::c_uint)?;
        }
    }
    result
}
