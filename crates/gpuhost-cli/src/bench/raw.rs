//! The raw driver side of the benchmarks: the same PTX and kernel through cudarc's `sys` layer,
//! in the host's context, with no gpuhost code on the measured path.

use std::ffi::{CString, c_void};
use std::ptr;

use anyhow::{Result, bail};
use gpuhost::sys::{self, CUfunction, CUmodule, CUresult, CUstream};

pub(super) fn ok(call: &str, r: CUresult) -> Result<()> {
    if r != CUresult::CUDA_SUCCESS {
        bail!("{call} failed: {r:?}");
    }
    Ok(())
}

/// A raw module, function and stream for the `noop(u32)` kernel.
pub struct Raw {
    module: CUmodule,
    func: CUfunction,
    stream: CUstream,
}

impl Raw {
    /// Load `ptx` in the host's context (the caller has entered the host on this thread).
    pub fn new(ptx: &str, kernel: &str) -> Result<Self> {
        let text = CString::new(ptx)?;
        let name = CString::new(kernel)?;
        let mut module: CUmodule = ptr::null_mut();
        // SAFETY: the host's context is current on this thread; text is NUL-terminated PTX.
        ok("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
        })?;
        let mut func: CUfunction = ptr::null_mut();
        // SAFETY: module was just loaded; name is NUL-terminated.
        ok("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut func, module, name.as_ptr())
        })?;
        let mut stream: CUstream = ptr::null_mut();
        // SAFETY: valid out pointer; context current.
        ok("cuStreamCreate", unsafe {
            sys::cuStreamCreate(
                &mut stream,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        })?;
        Ok(Self {
            module,
            func,
            stream,
        })
    }

    /// cuLaunchKernel of noop(n) on one block of 32 threads.
    #[inline]
    pub fn launch(&self, n: u32) -> Result<()> {
        let mut n = n;
        let mut params = [(&mut n as *mut u32).cast::<c_void>()];
        // SAFETY: func takes one 4-byte parameter, params points at one u32 alive for the call.
        ok("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.func,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                self.stream,
                params.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    pub fn sync(&self) -> Result<()> {
        // SAFETY: stream created in new(), context current.
        ok("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.stream)
        })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: handles created in new(); nothing uses them any more. Failures only leak.
        unsafe {
            let _ = sys::cuStreamSynchronize(self.stream);
            let _ = sys::cuStreamDestroy_v2(self.stream);
            let _ = sys::cuModuleUnload(self.module);
        }
    }
}

/// cuCtxGetCurrent alone: the floor of any bind-on-entry.
#[inline]
pub fn ctx_get_current() -> Result<()> {
    let mut c = ptr::null_mut();
    // SAFETY: valid out pointer.
    ok("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut c) })
}
