//! Loading one module image with cuModuleLoadDataEx (JIT error log captured), falling back to PTX
//! when a cubin/fatbin is refused; and unloading it.
//!
//! PTX is compiled apart, then loaded: cuLinkCreate/AddData/Complete make a device image in host
//! memory, which cuModuleLoadDataEx then loads. On the H200, cuModuleLoadDataEx of PTX holds
//! every other thread's driver calls (launches, event records) for its whole JIT: 1.2 s for a
//! 1.3 MB module with a cold JIT cache, so a guest loading large PTX could freeze every other
//! guest. cuLinkComplete holds nobody, and loading its image took 0.12 ms
//! (bench/h200-runs/2026-12-02-s12/unload-stall/README.md). Both use the driver's JIT cache.
//! The load itself still waits for running kernels, as every module load does there.
//! A driver without the cuLink* entry points gets cuModuleLoadDataEx of the PTX, as before.

use std::ffi::{CString, c_void};

use cudarc::driver::sys::{CUmodule, CUresult};

use crate::error::{Error, Result};
use crate::host::Host;
use crate::manifest::{ModuleImage, ModuleSource};
use crate::result::{self, DriverError, has_symbol, is_context_gone};

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
        Err((e, log)) => match &src.ptx_fallback {
            Some(ptx) if binary_refused(e.code) => {
                tracing::info!(module = %src.name, "binary image refused ({:?}: {log}); JIT-compiling its PTX", e.code);
                load_ptx(host, src, ptx)
            }
            _ => Err(invalid(src, e.code, &log)),
        },
    }
}

fn load_ptx(host: &Host, src: &ModuleSource, text: &str) -> Result<CUmodule> {
    let c = CString::new(text).map_err(|_| Error::InvalidModule {
        module: src.name.clone(),
        file: src.file.clone(),
        log: "PTX text contains a NUL byte".into(),
    })?;
    let loaded = if can_link() {
        let name = CString::new(src.name.as_str()).unwrap_or_default();
        // SAFETY: the caller has bound the context; the registry unloads the module once.
        unsafe { result::module::compile_and_load(&c, &name) }
    } else {
        load_image(c.as_ptr().cast())
    };
    match loaded {
        Ok(m) => Ok(m),
        Err((e, _)) if is_context_gone(e.code) => Err(host.classify(e)),
        Err((e, log)) => Err(invalid(src, e.code, &log)),
    }
}

/// Whether the driver can compile PTX apart from loading it (cuLink*).
fn can_link() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| {
        [
            "cuLinkCreate_v2",
            "cuLinkAddData_v2",
            "cuLinkComplete",
            "cuLinkDestroy",
        ]
        .iter()
        .all(|n| has_symbol(n))
    })
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

/// cuModuleLoadDataEx with JIT logs; on failure, the error and the log.
fn load_image(image: *const c_void) -> std::result::Result<CUmodule, (DriverError, String)> {
    // SAFETY: image points to a NUL-terminated PTX string or a complete binary image owned by
    // the caller for the call's duration; the caller has bound the context, and the registry
    // unloads the module once.
    unsafe { result::module::load(image) }
}

/// Unload a module of the bound context. It waits for every kernel running on the device, so
/// only the host's release thread calls it (see deferred.rs).
pub(crate) fn unload(host: &Host, m: CUmodule) -> Result<()> {
    // SAFETY: m was loaded in the current-generation context, which the caller has bound, and
    // nothing uses it any more (the caller checked holders and pending launches).
    host.check(unsafe { result::module::unload(m) })
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
