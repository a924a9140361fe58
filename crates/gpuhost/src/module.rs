//! Loading one module image with cuModuleLoadDataEx (JIT error log captured), falling back to PTX
//! when a cubin/fatbin is refused; and unloading it.

use std::ffi::{CString, c_void};
use std::ptr;

use cudarc::driver::sys::{self, CUjit_option, CUmodule, CUresult};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::manifest::{ModuleImage, ModuleSource};

const LOG_BYTES: usize = 16 * 1024;

/// Results after which a binary image is worth retrying as PTX.
fn binary_refused(r: CUresult) -> bool {
    use CUresult::*;
    matches!(
        r,
        CUDA_ERROR_NO_BINARY_FOR_GPU
            | CUDA_ERROR_INVALID_IMAGE
            | CUDA_ERROR_INVALID_SOURCE
            | CUDA_ERROR_NOT_SUPPORTED
            | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    )
}

/// Load `src` in the host's bound context (the caller has entered it).
pub(crate) fn load(host: &Host, src: &ModuleSource) -> Result<CUmodule> {
    let first = match &src.image {
        ModuleImage::Ptx(text) => return load_ptx(host, src, text),
        ModuleImage::Cubin(b) | ModuleImage::Fatbin(b) => load_image(b.as_ptr().cast()),
    };
    match first {
        Ok(m) => Ok(m),
        Err((r, log)) => match &src.ptx_fallback {
            Some(ptx) if binary_refused(r) => {
                tracing::info!(module = %src.name, "binary image refused ({r:?}: {log}); JIT-compiling its PTX");
                load_ptx(host, src, ptx)
            }
            _ => Err(invalid(src, r, &log)),
        },
    }
}

fn load_ptx(host: &Host, src: &ModuleSource, text: &str) -> Result<CUmodule> {
    let c = CString::new(text).map_err(|_| Error::InvalidModule {
        module: src.name.clone(),
        file: src.file.clone(),
        log: "PTX text contains a NUL byte".into(),
    })?;
    match load_image(c.as_ptr().cast()) {
        Ok(m) => Ok(m),
        Err((r, _)) if crate::driver::is_context_gone(r) => {
            host.classify("cuModuleLoadDataEx", r)?;
            Err(invalid(src, r, ""))
        }
        Err((r, log)) => Err(invalid(src, r, &log)),
    }
}

fn invalid(src: &ModuleSource, r: CUresult, log: &str) -> Error {
    let log = if log.trim().is_empty() {
        format!("{r:?} (the driver gave no log)")
    } else {
        format!("{r:?}: {}", log.trim())
    };
    Error::InvalidModule {
        module: src.name.clone(),
        file: src.file.clone(),
        log,
    }
}

/// cuModuleLoadDataEx with error and info log buffers; on failure, the result and the log.
fn load_image(image: *const c_void) -> std::result::Result<CUmodule, (CUresult, String)> {
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
    // SAFETY: image points to a NUL-terminated PTX string or a complete binary image owned by
    // the caller for the call's duration; the log buffers are LOG_BYTES long, as declared.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image,
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    if r == CUresult::CUDA_SUCCESS {
        return Ok(module);
    }
    let text = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let mut log = text(&err_log);
    if log.trim().is_empty() {
        log = text(&info_log);
    }
    Err((r, log))
}

/// Unload a module of the bound context.
pub(crate) fn unload(host: &Host, m: CUmodule) -> Result<()> {
    // SAFETY: m was loaded in the current-generation context, which the caller has bound, and
    // nothing uses it any more (the caller checked holders and pending launches).
    let r = unsafe { sys::cuModuleUnload(m) };
    host.classify("cuModuleUnload", r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_binary_refusals_fall_back_to_ptx() {
        assert!(binary_refused(CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU));
        assert!(binary_refused(CUresult::CUDA_ERROR_INVALID_IMAGE));
        assert!(!binary_refused(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
    }

    #[test]
    fn invalid_module_error_names_file_and_log() {
        let mut src = ModuleSource::new("m", ModuleImage::Ptx(String::new()));
        src.file = Some("/b/m.ptx".into());
        let e = invalid(&src, CUresult::CUDA_ERROR_INVALID_PTX, "line 3: bad\n");
        let s = e.to_string();
        assert!(
            s.contains("/b/m.ptx") && s.contains("line 3: bad") && s.contains("INVALID_PTX"),
            "{s}"
        );
    }
}
