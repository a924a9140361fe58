//! Helpers shared by the tests: a lock that serializes tests touching process-wide driver state
//! (the primary context, memory accounting), a way to run a test in its own process, checked
//! wrappers over the C ABI, and a kernel that runs until the test lets it end.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUfunction, CUmodule, CUresult, CUstream};
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

/// `i = 0; do { p[0] = ++i; } while (*go == 0); *done = 1;` in each thread: a kernel that shows
/// it runs (its stores at `p`) and runs until the test lets it end (a fixed trip count ended
/// before the tests' checks in a release build, as ptxvm grew faster).
const SPIN: &str = r#"
.version 7.0
.target sm_80
.address_size 64

.visible .entry spin(.param .u64 p, .param .u64 go, .param .u64 done)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u64 %rd2, [go];
    ld.param.u64 %rd3, [done];
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd1], %r2;
    ld.volatile.global.u32 %r1, [%rd2];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra LOOP;
    mov.u32 %r1, 1;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#;

/// [`SPIN`]'s kernel, loaded in the current context.
pub fn spin_kernel() -> CUfunction {
    let ptx = std::ffi::CString::new(SPIN).unwrap();
    let mut m: CUmodule = std::ptr::null_mut();
    let mut f: CUfunction = std::ptr::null_mut();
    // SAFETY: NUL-terminated PTX, valid out-pointers, NUL-terminated name.
    unsafe {
        ok(cuModuleLoadData(&mut m, ptx.as_ptr().cast()));
        ok(cuModuleGetFunction(&mut f, m, c"spin".as_ptr()));
    }
    f
}

/// Launches [`spin_kernel`]`(p, go, done)` on `s`, one block of `threads` threads.
pub fn launch_spin(f: CUfunction, s: CUstream, threads: u32, [p, go, done]: [CUdeviceptr; 3]) {
    let (mut p, mut go, mut done) = (p, go, done);
    let mut args: [*mut c_void; 3] = [
        (&raw mut p).cast(),
        (&raw mut go).cast(),
        (&raw mut done).cast(),
    ];
    // SAFETY: three parameters, each pointer to a value of the parameter's size.
    ok(unsafe {
        cuLaunchKernel(
            f,
            1,
            1,
            1,
            threads,
            1,
            1,
            0,
            s,
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    });
}

/// The `u32` at device address `at`, a live allocation: softcuda's device memory is host memory
/// at its device address, and kernels there see volatile host accesses.
pub fn word(at: CUdeviceptr) -> &'static AtomicU32 {
    // SAFETY: the caller names a live, 4-aligned allocation it does not free meanwhile; kernels
    // touch it with their own loads and stores, outside Rust's memory model either way.
    unsafe { AtomicU32::from_ptr(at as usize as *mut u32) }
}

/// Waits (up to 60 s) until the `u32` at `at` is not 0: a [`spin_kernel`] given `p = at` runs.
pub fn wait_running(at: CUdeviceptr) {
    let began = std::time::Instant::now();
    while word(at).load(Ordering::SeqCst) == 0 {
        assert!(began.elapsed().as_secs() < 60, "the kernel never started");
        std::thread::yield_now();
    }
}
