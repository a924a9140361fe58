//! The primary context as a safe type: retained on creation, released on drop, bound to the
//! calling thread before every call made through it (the current context is per thread).

use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{result, sys};

use crate::driver::Env;
use crate::error::{Error, Result};

/// A retained primary context of one device. Every child object holds an `Arc` to it, so it is
/// released only after all of them.
#[derive(Debug)]
pub struct Context {
    pub(crate) raw: sys::CUcontext,
    pub(crate) device: sys::CUdevice,
}

// SAFETY: a CUcontext is a process-wide driver handle; the driver API is thread-safe and any
// thread may bind it with cuCtxSetCurrent, which `bind` does before each use.
unsafe impl Send for Context {}
// SAFETY: as above; `Context` has no interior state besides the handle.
unsafe impl Sync for Context {}

impl Context {
    /// Retains device `env.device`'s primary context and makes it current on this thread.
    pub fn primary(env: &Env) -> Result<Arc<Context>> {
        // SAFETY: `env.device` came from cuDeviceGet after a successful cuInit.
        let raw = unsafe { result::primary_ctx::retain(env.device) }
            .map_err(|e| Error::driver("cuDevicePrimaryCtxRetain", e))?;
        let ctx = Arc::new(Context {
            raw,
            device: env.device,
        });
        ctx.bind()?;
        Ok(ctx)
    }

    /// Makes this context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        // SAFETY: `raw` is a retained primary context handle (alive until our Drop).
        unsafe { result::ctx::set_current(self.raw) }
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))
    }

    /// The raw handle, for driver-semantics tests that compare handle values.
    pub fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// The device this context belongs to.
    pub fn device(&self) -> sys::CUdevice {
        self.device
    }

    /// Waits for all work in the context (binds it first).
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        result::ctx::synchronize().map_err(|e| Error::driver("cuCtxSynchronize", e))
    }

    /// `(free, total)` bytes of device memory as `cuMemGetInfo` reports them.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().map_err(|e| Error::driver("cuMemGetInfo", e))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `primary`; the device handle is still valid.
        if let Err(e) = unsafe { result::primary_ctx::release(self.device) } {
            record_drop_error("cuDevicePrimaryCtxRelease", e);
        }
    }
}

static DROP_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes that a destructor's driver call failed. Destructors cannot return errors and must not
/// panic; the list is printed and can be inspected with [`take_drop_errors`].
pub(crate) fn record_drop_error(call: &'static str, err: cudarc::driver::DriverError) {
    let line = format!("{call} in drop failed: {:?}", err.0);
    eprintln!("conformance: {line}");
    DROP_ERRORS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(line);
}

/// Takes the destructor failures recorded so far in this process.
pub fn take_drop_errors() -> Vec<String> {
    std::mem::take(&mut *DROP_ERRORS.lock().unwrap_or_else(PoisonError::into_inner))
}
