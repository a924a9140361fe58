//! Which libcuda runs, and driver initialisation (the raw calls themselves are in `result`).
//!
//! cudarc panics on its first call when no libcuda can be opened, so nothing here touches cudarc
//! before `softcuda::loader::select` has succeeded. A failed selection or cuInit is not cached.

use std::path::PathBuf;
use std::sync::Mutex;

use cudarc::driver::sys::CUresult;

use crate::error::{Error, Result};
use crate::result::{self, has_symbol};

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
    // The loader has opened a libcuda, so cudarc's lazy dlopen finds it.
    let r = result::init();
    if r != CUresult::CUDA_SUCCESS {
        return Err(Error::NoDriver {
            reason: format!("cuInit failed: {r:?} (driver {})", choice.path.display()),
        });
    }
    let version = result::driver_version()?;
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
    // driver() succeeded: the library is loaded and initialised.
    driver()?;
    Ok(result::device_count()?.max(0) as usize)
}
