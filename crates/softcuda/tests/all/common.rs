//! Helpers shared by the tests: a lock that serializes tests touching process-wide driver state
//! (the primary context, memory accounting), a way to run a test in its own process, and checked
//! wrappers over the C ABI.

use std::ffi::c_void;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUresult, CUstream};
use softcuda::exports::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// Serializes a test against every other driver test in this binary.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Names the test a child process started by [`in_child`] runs.
const CHILD_ENV: &str = "SOFTCUDA_TEST_CHILD";

/// Whether this process is a child started by [`in_child`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs `body` in a child process: this test binary re-run on test `name` (its path, e.g.
/// `"module::x"`) with [`CHILD_ENV`] set, after `configure` adjusts the command. For state that
/// lasts for the process (a device fault, the driver choice). In the parent, asserts the child ran
/// that one test and passed, and returns its stdout; in the child, runs `body` and returns "".
pub fn in_child(name: &str, configure: impl FnOnce(&mut Command), body: impl FnOnce()) -> String {
    if std::env::var(CHILD_ENV).is_ok_and(|n| n == name) {
        body();
        return String::new();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture"])
        .env(CHILD_ENV, name);
    configure(&mut cmd);
    let out = cmd.output().expect("run the test binary as a child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child running {name} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

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
