//! Modules and their functions: cuModuleLoadDataEx (with JIT logs), PTX compiled by cuLink*
//! then loaded, cuModuleGetFunction, cuModuleUnload, cuFuncGetParamInfo, cuFuncGetAttribute.

use std::ffi::{CStr, c_void};
use std::ptr;

use cudarc::driver::sys::{
    self, CUfunction, CUfunction_attribute, CUjit_option, CUjitInputType, CUlinkState, CUmodule,
};

use super::{DriverError, DriverResult, ok};

/// Bytes of each JIT log buffer.
const LOG_BYTES: usize = 16 * 1024;

/// The JIT options gpuhost passes (error and info log buffers) with their buffers. The driver
/// writes through the value array and the buffers during the call (cuModuleLoadDataEx) or until
/// cuLinkDestroy, so neither may move or go meanwhile: the caller keeps this value in place.
struct JitLogs {
    err_log: Vec<u8>,
    info_log: Vec<u8>,
    opts: [CUjit_option; 4],
    vals: [*mut c_void; 4],
}

impl JitLogs {
    fn new() -> Self {
        let mut err_log = vec![0u8; LOG_BYTES];
        let mut info_log = vec![0u8; LOG_BYTES];
        // The driver reads sizes as integers stored in the pointer slots (the documented
        // encoding). The buffers are heap memory: moving the Vecs does not move them.
        let vals: [*mut c_void; 4] = [
            err_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            info_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
        ];
        JitLogs {
            err_log,
            info_log,
            opts: [
                CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
                CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                CUjit_option::CU_JIT_INFO_LOG_BUFFER,
                CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            ],
            vals,
        }
    }

    /// The JIT's log: its error log, else its info log.
    fn text(&self) -> String {
        let text = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        let log = text(&self.err_log);
        if log.trim().is_empty() {
            text(&self.info_log)
        } else {
            log
        }
    }
}

/// cuModuleLoadDataEx with error and info log buffers; on failure, the error and the JIT's log
/// (its error log, else its info log).
///
/// # Safety
/// `image` points to a NUL-terminated PTX string or a complete binary image, readable for the
/// call's duration; the caller's context is bound, and the caller unloads the module once.
pub(crate) unsafe fn load(image: *const c_void) -> Result<CUmodule, (DriverError, String)> {
    let mut logs = JitLogs::new();
    let mut module: CUmodule = ptr::null_mut();
    // SAFETY: the image as the caller promises (above); the log buffers are LOG_BYTES long, as
    // declared; one value per option; `logs` stays in place for the call.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image,
            logs.opts.len() as u32,
            logs.opts.as_mut_ptr(),
            logs.vals.as_mut_ptr(),
        )
    };
    let Err(e) = ok("cuModuleLoadDataEx", r) else {
        return Ok(module);
    };
    Err((e, logs.text()))
}

/// Compiles `ptx` with cuLinkCreate/AddData/Complete (the same log options as [`load`]), then
/// loads the device image it made with [`load`] before the link state goes. On NVIDIA's driver
/// the compile then holds no other thread's driver calls, where cuModuleLoadDataEx of the PTX
/// holds them for the whole JIT (bench/h200-runs/2026-12-02-s12/unload-stall/); the driver's
/// JIT cache serves both. On failure, the error and the JIT's log.
///
/// # Safety
/// The caller's context is bound, and the caller unloads the module once.
pub(crate) unsafe fn compile_and_load(
    ptx: &CStr,
    name: &CStr,
) -> Result<CUmodule, (DriverError, String)> {
    // Kept in place until cuLinkDestroy, which comes before it goes.
    let mut logs = JitLogs::new();
    let mut state: CUlinkState = ptr::null_mut();
    // SAFETY: one value per option; the log buffers are LOG_BYTES long, as declared, and they
    // and both arrays outlive the link state (destroyed below); the context is bound.
    let r = unsafe {
        sys::cuLinkCreate_v2(
            logs.opts.len() as u32,
            logs.opts.as_mut_ptr(),
            logs.vals.as_mut_ptr(),
            &mut state,
        )
    };
    if let Err(e) = ok("cuLinkCreate", r) {
        return Err((e, logs.text()));
    }
    let linked = (|| {
        let bytes = ptx.to_bytes_with_nul();
        // SAFETY: a live link state; the driver reads `bytes.len()` bytes of NUL-terminated
        // PTX (not written, despite the pointer's type) and the NUL-terminated name; no options.
        ok("cuLinkAddData", unsafe {
            sys::cuLinkAddData_v2(
                state,
                CUjitInputType::CU_JIT_INPUT_PTX,
                bytes.as_ptr().cast_mut().cast(),
                bytes.len(),
                name.as_ptr(),
                0,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        })
        .map_err(|e| (e, String::new()))?;
        let (mut image, mut size) = (ptr::null_mut::<c_void>(), 0usize);
        // SAFETY: a live link state with its input; valid out pointers.
        ok("cuLinkComplete", unsafe {
            sys::cuLinkComplete(state, &mut image, &mut size)
        })
        .map_err(|e| (e, String::new()))?;
        // SAFETY: the image cuLinkComplete made, valid until cuLinkDestroy (below); context
        // bound and the module unloaded once, as the caller promises.
        unsafe { load(image) }
    })();
    // SAFETY: the live link state made above, destroyed once, after the image was loaded.
    if let Err(e) = ok("cuLinkDestroy", unsafe { sys::cuLinkDestroy(state) }) {
        tracing::warn!("cuLinkDestroy: {:?}", e.code);
    }
    linked.map_err(|(e, log)| {
        if log.trim().is_empty() {
            (e, logs.text())
        } else {
            (e, log)
        }
    })
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

/// cuFuncGetAttribute: one of `func`'s compiled limits or sizes (registers per thread, threads
/// per block it allows, shared memory).
///
/// # Safety
/// `func` is a live function of the bound context.
pub(crate) unsafe fn attribute(func: CUfunction, a: CUfunction_attribute) -> DriverResult<i32> {
    let mut v = 0;
    // SAFETY: valid out pointer; func as the caller promises (above).
    ok("cuFuncGetAttribute", unsafe {
        sys::cuFuncGetAttribute(&mut v, a, func)
    })?;
    Ok(v)
}
