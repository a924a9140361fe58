//! Which libcuda runs, driver initialisation, and the checked-call layer over cudarc's `sys`.
//!
//! cudarc panics on its first call when no libcuda can be opened, so nothing here touches cudarc
//! before `softcuda::loader::select` has succeeded. A failed selection or cuInit is not cached.

use std::ffi::{CStr, c_void};
use std::path::PathBuf;
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUresult};

use crate::error::{Error, Result};

/// Which driver gpuhost is running on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// NVIDIA's libcuda.
    Nvidia,
    /// softcuda, the PTX-interpreting software driver.
    Softcuda,
}

impl std::fmt::Display for DriverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DriverKind::Nvidia => "nvidia",
            DriverKind::Softcuda => "softcuda",
        })
    }
}

/// The driver in use: which, where, why it was chosen, and its version.
#[derive(Debug, Clone)]
pub struct DriverInfo {
    /// NVIDIA or softcuda.
    pub kind: DriverKind,
    /// The library file.
    pub path: PathBuf,
    /// Why the loader chose it.
    pub reason: String,
    /// cuDriverGetVersion, e.g. 12080.
    pub version: i32,
}

static DRIVER: Mutex<Option<DriverInfo>> = Mutex::new(None);

/// Every driver entry point gpuhost calls unconditionally. cudarc panics when it calls a missing
/// one, so a driver lacking any of them is refused up front. (cuCtxGetId and cuFuncGetParamInfo
/// are optional: probed where used.)
const REQUIRED: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxGetState",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetInfo_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoD_v2",
    "cuMemsetD8_v2",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
];

/// Prefix of the NoDriver reason when a driver was found but lacks entry points.
pub const INCOMPLETE_DRIVER: &str = "incomplete driver";

/// Select, load and initialise the driver (once per process on success), and describe it.
pub fn driver() -> Result<DriverInfo> {
    let mut slot = DRIVER.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(info) = slot.as_ref() {
        return Ok(info.clone());
    }
    let pref = softcuda::loader::Preference::from_env().map_err(|e| Error::NoDriver {
        reason: e.to_string(),
    })?;
    let choice = softcuda::loader::select(pref).map_err(|e| Error::NoDriver {
        reason: e.to_string(),
    })?;
    let kind = match choice.kind {
        softcuda::loader::DriverKind::Nvidia => DriverKind::Nvidia,
        softcuda::loader::DriverKind::Soft => DriverKind::Softcuda,
    };
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|n| !has_symbol(n))
        .collect();
    if !missing.is_empty() {
        return Err(Error::NoDriver {
            reason: format!(
                "{INCOMPLETE_DRIVER}: {} lacks {}",
                choice.path.display(),
                missing.join(", ")
            ),
        });
    }
    // SAFETY: the loader has opened a libcuda, so cudarc's lazy dlopen finds it; cuInit has no
    // pointer arguments.
    let r = unsafe { sys::cuInit(0) };
    if r != CUresult::CUDA_SUCCESS {
        return Err(Error::NoDriver {
            reason: format!("cuInit failed: {r:?} (driver {})", choice.path.display()),
        });
    }
    let mut version = 0;
    // SAFETY: `version` is a valid out pointer for the call's duration.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version)
    })?;
    let info = DriverInfo {
        kind,
        path: choice.path.clone(),
        reason: choice.reason.clone(),
        version,
    };
    *slot = Some(info.clone());
    Ok(info)
}

/// How many devices the driver reports.
pub fn device_count() -> Result<usize> {
    driver()?;
    let mut n = 0;
    // SAFETY: driver() succeeded, so the library is loaded and initialised; `n` is a valid out pointer.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// Whether the loaded driver exports `name` (optional entry points such as cuFuncGetParamInfo:
/// calling a missing one through cudarc would panic).
pub(crate) fn has_symbol(name: &str) -> bool {
    // SAFETY: only called after the loader selected a driver, so culib() finds the loaded library
    // and does not panic; looking a symbol up has no side effects.
    unsafe { sys::culib().get::<*const c_void>(name.as_bytes()).is_ok() }
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

/// Map a CUresult to gpuhost's error (sticky ones to ContextPoisoned). Context-gone results are
/// mapped to `Driver` here; callers holding a host turn them into ContextLost via `Host::classify`.
pub(crate) fn check(call: &'static str, r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    if is_sticky(r) {
        return Err(Error::ContextPoisoned {
            call,
            name: result_name(r),
        });
    }
    Err(Error::Driver {
        call,
        code: r,
        name: result_name(r),
    })
}

/// A device's name as the driver reports it.
pub(crate) fn device_name(dev: sys::CUdevice) -> Result<String> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: buf is writable for its whole length, which is what we pass.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // SAFETY: the driver NUL-terminates the name within the buffer; the last byte is forced to NUL.
    buf[255] = 0;
    // SAFETY: buf holds a NUL-terminated string (last byte forced to 0 above).
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_errors_are_classified_as_poison() {
        assert!(is_sticky(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_sticky(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert!(matches!(
            check("cuX", CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
            Err(Error::ContextPoisoned { call: "cuX", .. })
        ));
    }

    #[test]
    fn driver_error_names_the_call_and_result() {
        let e = check("cuMemAlloc_v2", CUresult::CUDA_ERROR_OUT_OF_MEMORY).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cuMemAlloc_v2"), "{msg}");
        assert!(msg.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{msg}");
        assert!(check("cuX", CUresult::CUDA_SUCCESS).is_ok());
    }

    #[test]
    fn context_gone_results_are_recognised() {
        assert!(is_context_gone(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED));
        assert!(is_context_gone(CUresult::CUDA_ERROR_INVALID_CONTEXT));
        assert!(!is_context_gone(CUresult::CUDA_ERROR_INVALID_HANDLE));
    }
}
