//! A loaded PTX module and the kernels in it, as safe types.

use std::ffi::CString;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::context::{Context, record_drop_error};
use crate::error::{Error, Result};

/// A module loaded with `cuModuleLoadData` from PTX text.
#[derive(Debug)]
pub struct Module {
    pub(crate) raw: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: a CUmodule is a driver handle usable from any thread that binds its context, which
// every method here does first.
unsafe impl Send for Module {}
// SAFETY: as above; no interior state besides the handle.
unsafe impl Sync for Module {}

impl Module {
    /// Loads `ptx` into `ctx`. PTX with an interior NUL is refused as malformed input.
    pub fn load_ptx(ctx: &Arc<Context>, ptx: &str) -> Result<Arc<Module>> {
        let image = CString::new(ptx).map_err(|_| Error::BadCase {
            case: "PTX".into(),
            detail: "the PTX text contains a NUL byte".into(),
        })?;
        ctx.bind()?;
        // SAFETY: `image` is a NUL-terminated PTX string that outlives the call; a context is current.
        let raw = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(|e| Error::driver("cuModuleLoadData", e))?;
        Ok(Arc::new(Module {
            raw,
            ctx: Arc::clone(ctx),
        }))
    }

    /// The raw handle, for stale-handle tests.
    pub fn raw(&self) -> sys::CUmodule {
        self.raw
    }

    /// The context the module lives in.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The kernel named `name` (an `extern "C"` entry).
    pub fn function(self: &Arc<Self>, name: &str) -> Result<Function> {
        let cname = CString::new(name).map_err(|_| Error::BadCase {
            case: name.into(),
            detail: "kernel name contains a NUL byte".into(),
        })?;
        self.ctx.bind()?;
        // SAFETY: `raw` is a live module (we hold it); `cname` is NUL-terminated.
        let raw = unsafe { result::module::get_function(self.raw, cname) }
            .map_err(|e| Error::driver("cuModuleGetFunction", e))?;
        Ok(Function {
            raw,
            module: Arc::clone(self),
        })
    }

    /// Overwrites module variable `name` (a `__constant__` or `__device__` global) with `bytes`,
    /// which must be exactly its size.
    pub fn write_global(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let cname = CString::new(name).map_err(|_| Error::BadCase {
            case: name.into(),
            detail: "global name contains a NUL byte".into(),
        })?;
        self.ctx.bind()?;
        // SAFETY: `raw` is a live module; `cname` is NUL-terminated.
        let (ptr, size) = unsafe { result::module::get_global(self.raw, cname) }
            .map_err(|e| Error::driver("cuModuleGetGlobal", e))?;
        if size != bytes.len() {
            return Err(Error::BadCase {
                case: name.into(),
                detail: format!("global is {size} bytes, the case writes {}", bytes.len()),
            });
        }
        // SAFETY: [ptr, ptr + size) is the module variable, live while the module is loaded.
        unsafe { result::memcpy_htod_sync(ptr, bytes) }
            .map_err(|e| Error::driver("cuMemcpyHtoD", e))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind() {
            eprintln!("conformance: cannot bind context to unload a module: {e}");
            return;
        }
        // SAFETY: `raw` was loaded in this context and is unloaded exactly once, here; every
        // Function holds an Arc to us, so none outlives the module.
        if let Err(e) = unsafe { result::module::unload(self.raw) } {
            record_drop_error("cuModuleUnload", e);
        }
    }
}

/// A kernel handle; keeps its module loaded.
#[derive(Debug)]
pub struct Function {
    pub(crate) raw: sys::CUfunction,
    module: Arc<Module>,
}

// SAFETY: a CUfunction is an immutable driver handle valid while its module is loaded, which our
// Arc guarantees; launches bind the context first.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Function {
    /// The module holding this kernel.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// The raw handle.
    pub fn raw(&self) -> sys::CUfunction {
        self.raw
    }
}
