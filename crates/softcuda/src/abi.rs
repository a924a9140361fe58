//! Helpers for the C boundary: turning a `Result` into a `CUresult`, catching panics so that none
//! unwinds into C, and checked access to the caller's out-pointers and in-pointers.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::driver::sys::CUresult;

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


/// Converts a C `int` ordinal or count that must not be negative.
pub(crate) fn non_negative(value: i32) -> CuResult<u32> {
    u32::try_from(value).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)
}
