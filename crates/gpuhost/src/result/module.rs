//! Modules and their functions: cuModuleLoadDataEx (with JIT logs), cuModuleGetFunction,
//! cuModuleUnload, cuFuncGetParamInfo.

use std::ffi::{CStr, c_void};
use std::ptr;

use cudarc::driver::sys::{self, CUfunction, CUjit_option, CUmodule};

use super::{DriverError, DriverResult, ok};

/// Bytes of each JIT log buffer.
const LOG_BYTES: usize = 16 * 1024;

/// cuModuleLoadDataEx with error and info log buffers; on failure, the error and the JIT's log
/// (its error log, else its info log).
///
/// # Safety
/// `image` points to a NUL-terminated PTX string or a complete binary image, readable for the
/// call's duration; the caller's context is bound, and the caller unloads the module once.
pub(crate) unsafe fn load(image: *const c_void) -> Result<CUmodule, (DriverError, String)> {
    let mut err_log = vec![0u8; LOG_BYTES];
    let mut info_log = vec![0u8; LOG_BYTES];
    let mut opts = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads sizes as integers stored in the pointer slots (the documented encoding).
    let mut vals: [*mut c_void; 4] = [
        err_log.as_mut_ptr().cast(),
        LOG_BYTES as *mut c_void,
        info_log.as_mut_ptr().cast(),
        LOG_BYTES as *mut c_void,
    ];
    let mut module: CUmodule = ptr::null_mut();
    // SAFETY: the image as the caller promises (above); the log buffers are LOG_BYTES long, as
    // declared; one value per option.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image,
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    let Err(e) = ok("cuModuleLoadDataEx", r) else {
        return Ok(module);
    };
    let text = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let mut log = text(&err_log);
    if log.trim().is_empty() {
        log = text(&info_log);
    }
    Err((e, log))
}

/// cuModuleGetFunction: kernel `name` of `m` (CUDA_ERROR_NOT_FOUND when it has none).
///
/// # Safety
/// `m` is a loaded module of the bound context.
pub(crate) unsafe fn function(m: CUmodule, name: &CStr) -> DriverResult<CUfunction> {
    let mut f: CUfunction = ptr::null_mut();
    // SAFETY: name is NUL-terminated; f a valid out pointer; m as the caller promises (above).
    ok("cuModuleGetFunction", unsafe {
        sys::cuModuleGetFunction(&mut f, m, name.as_ptr())
    })?;
    Ok(f)
}

/// cuModuleUnload.
///
/// # Safety
/// `m` was loaded in the bound context, is unloaded once, and nothing uses it any more.
pub(crate) unsafe fn unload(m: CUmodule) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuModuleUnload", unsafe { sys::cuModuleUnload(m) })
}

/// cuFuncGetParamInfo: (offset, size) of parameter `index` of `func` (CUDA_ERROR_INVALID_VALUE
/// past the last). Optional entry point: the caller checks `has_symbol` first.
///
/// # Safety
/// `func` is a live function of the bound context, and the driver exports the entry point.
pub(crate) unsafe fn param_info(func: CUfunction, index: usize) -> DriverResult<(usize, usize)> {
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: valid out pointers; func and the entry point as the caller promises (above).
    ok("cuFuncGetParamInfo", unsafe {
        sys::cuFuncGetParamInfo(func, index, &mut offset, &mut size)
    })?;
    Ok((offset, size))
}
