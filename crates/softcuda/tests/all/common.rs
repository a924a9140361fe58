//! Helpers shared by the tests: a lock that serializes tests touching process-wide driver state
//! (the primary context, memory accounting), a way to run a test in its own process, and checked
//! wrappers over the C ABI.

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUresult, CUstream};
use softcuda::exports::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// Serializes a test against every other driver test in this binary.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs a test in its own process (configuring the child's command first), and tells a child.
pub use testkit::{in_child_with as in_child, is_child};

/// Panics with the call and the code when `r` is not success.
#[track_caller]
pub fn ok(r: CUresult) {
    assert_eq!(r, CUresult::CUDA_SUCCESS);
}

/// cuInit, then a fresh primary context (reset first) made current on this thread.
pub fn fresh_primary() -> CUcontext {
    // SAFETY: plain calls with valid out-pointers.
    unsafe {
        ok(cuInit(0));
        ok(cuDevicePrimaryCtxReset_v2(0));
        let mut ctx: CUcontext = std::ptr::null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok(cuCtxSetCurrent(ctx));
        ctx
    }
}

/// Device memory of `len` bytes in the current context.
pub fn alloc(len: usize) -> CUdeviceptr {
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    ok(unsafe { cuMemAlloc_v2(&mut d, len) });
    d
}

/// Copies `data` to `dst` synchronously.
pub fn upload<T: Copy>(dst: CUdeviceptr, data: &[T]) {
    // SAFETY: `data` is readable for its byte length.
    ok(unsafe {
        cuMemcpyHtoD_v2(
            dst,
            data.as_ptr().cast::<c_void>(),
            std::mem::size_of_val(data),
        )
    });
}

/// Reads `n` values of T from `src` synchronously.
pub fn download<T: Copy + Default>(src: CUdeviceptr, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    // SAFETY: `out` is writable for its byte length.
    ok(unsafe {
        cuMemcpyDtoH_v2(
            out.as_mut_ptr().cast::<c_void>(),
            src,
            std::mem::size_of_val(&out[..]),
        )
    });
    out
}

/// A new stream with `flags`.
pub fn stream(flags: u32) -> CUstream {
    let mut s: CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { cuStreamCreate(&mut s, flags) });
    s
}
