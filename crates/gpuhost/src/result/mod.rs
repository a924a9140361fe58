//! The one layer over cudarc's raw driver calls (`sys::cu*`), in the way of cudarc's own
//! `sys` → `result` → `safe` layering: one thin function per driver call, returning its out
//! values or a [`DriverError`] that names the call and carries its `CUresult`. Nothing else in
//! gpuhost calls `sys::cu*`.
//!
//! cudarc's `driver::result` is not used because it lacks entry points gpuhost needs (virtual
//! memory management, graph kernel nodes, host registration, cuCtxGetId, cuFuncGetParamInfo,
//! cuModuleLoadDataEx with JIT logs) and its errors do not name the call.
//!
//! Classification happens in two places only: [`Host::check`](crate::host::Host) for calls made
//! on a host (a context loss becomes [`Error::ContextLost`] and bumps the generation), and
//! `From<DriverError> for Error` for calls made without one (sticky errors become
//! [`Error::ContextPoisoned`], the rest [`Error::Driver`] with the typed code).
//!
//! Most functions are `unsafe`: their handles and pointers must be live in the bound context,
//! which the types cannot say. Calls that take only a device ordinal or handle and out values
//! the wrapper owns are safe. Every function here needs a selected driver (`driver::driver()`
//! succeeded): cudarc panics on its first call when no libcuda is loaded.

pub(crate) mod ctx;
pub(crate) mod graph;
pub(crate) mod mem;
pub(crate) mod module;
pub(crate) mod stream;
pub(crate) mod vmm;

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUresult};

use crate::error::Error;

/// A driver call that failed: which call, and the `CUresult` it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DriverError {
    /// The driver function, as gpuhost's errors name it.
    pub(crate) call: &'static str,
    /// What it returned (never `CUDA_SUCCESS`).
    pub(crate) code: CUresult,
}

impl DriverError {
    /// True when the call failed with `code`.
    pub(crate) fn is(&self, code: CUresult) -> bool {
        self.code == code
    }
}

/// Result of one raw driver call.
pub(crate) type DriverResult<T = ()> = Result<T, DriverError>;

/// `r` of `call` as a result.
pub(crate) fn ok(call: &'static str, r: CUresult) -> DriverResult {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(DriverError { call, code: r })
    }
}

/// A call made without a host: sticky results poison the device, the rest are `Error::Driver`.
/// (Context-gone results stay `Driver` here; a host turns them into ContextLost.)
impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        if is_sticky(e.code) {
            Error::ContextPoisoned {
                call: e.call,
                name: result_name(e.code),
            }
        } else {
            Error::Driver {
                call: e.call,
                code: e.code,
                name: result_name(e.code),
            }
        }
    }
}

/// The CUresult's name as the driver spells it (CUDA_ERROR_...).
pub(crate) fn result_name(r: CUresult) -> String {
    format!("{r:?}")
}

/// Errors after which every later call fails, for the rest of the process (a reset does not help).
pub(crate) fn is_sticky(r: CUresult) -> bool {
    use CUresult::*;
    matches!(
        r,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// Errors that mean the context behind a handle no longer exists.
pub(crate) fn is_context_gone(r: CUresult) -> bool {
    matches!(
        r,
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED | CUresult::CUDA_ERROR_INVALID_CONTEXT
    )
}

/// Whether the loaded driver exports `name` (optional entry points such as cuFuncGetParamInfo:
/// calling a missing one through cudarc would panic).
pub(crate) fn has_symbol(name: &str) -> bool {
    // SAFETY: only called after the loader selected a driver, so culib() finds the loaded library
    // and does not panic; looking a symbol up has no side effects.
    unsafe { sys::culib().get::<*const c_void>(name.as_bytes()).is_ok() }
}

/// cuInit. Returns the raw result: a failure here means "no driver", not a driver error.
pub(crate) fn init() -> CUresult {
    // SAFETY: cuInit has no pointer arguments; the loader has opened a libcuda, so cudarc's lazy
    // dlopen finds it.
    unsafe { sys::cuInit(0) }
}

/// cuDriverGetVersion, e.g. 12080.
pub(crate) fn driver_version() -> DriverResult<i32> {
    let mut version = 0;
    // SAFETY: `version` is a valid out pointer for the call's duration.
    ok("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    Ok(version)
}

/// cuDeviceGetCount.
pub(crate) fn device_count() -> DriverResult<i32> {
    let mut n = 0;
    // SAFETY: `n` is a valid out pointer.
    ok("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_errors_are_classified_as_poison() {
        assert!(is_sticky(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_sticky(CUresult::CUDA_ERROR_INVALID_VALUE));
        let e = ok("cuX", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS).unwrap_err();
        assert!(matches!(
            Error::from(e),
            Error::ContextPoisoned { call: "cuX", .. }
        ));
    }

    #[test]
    fn driver_error_names_the_call_and_carries_the_code() {
        let e = Error::from(ok("cuMemAlloc_v2", CUresult::CUDA_ERROR_OUT_OF_MEMORY).unwrap_err());
        let msg = e.to_string();
        assert!(msg.contains("cuMemAlloc_v2"), "{msg}");
        assert!(msg.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{msg}");
        assert!(matches!(
            e,
            Error::Driver {
                code: CUresult::CUDA_ERROR_OUT_OF_MEMORY,
                ..
            }
        ));
        assert!(ok("cuX", CUresult::CUDA_SUCCESS).is_ok());
    }

    #[test]
    fn context_gone_results_are_recognised() {
        assert!(is_context_gone(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED));
        assert!(is_context_gone(CUresult::CUDA_ERROR_INVALID_CONTEXT));
        assert!(!is_context_gone(CUresult::CUDA_ERROR_INVALID_HANDLE));
    }
}
