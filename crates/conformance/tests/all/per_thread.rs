//! The per-thread default stream (`CU_STREAM_PER_THREAD`, and NULL in the `_ptsz` / `_ptds`
//! variants that cuGetProcAddress answers for `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`):
//! each thread has its own, which does not wait for another thread's, while the legacy default
//! stream waits for it (NVIDIA documents it as a blocking stream); a `_ptsz` launch with NULL
//! goes to the calling thread's per-thread stream, and a `_ptds` copy is ordered after it.
//!
//! A stream is held back by cuStreamWaitValue32 on a device word that a non-blocking stream
//! writes at the end (or when a failed step unwinds), so no test can leave a stream waiting.

use std::ffi::{CString, c_uint, c_void};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, check_all_f32, clang_ptx, env_or_skip};

/// `CU_STREAM_PER_THREAD`.
fn per_thread() -> sys::CUstream {
    std::ptr::without_provenance_mut(0x2)
}

/// The legacy default stream (NULL).
fn legacy() -> sys::CUstream {
    std::ptr::null_mut()
}

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM` and `_PER_THREAD_DEFAULT_STREAM`.
const LEGACY_FLAG: u64 = 1;
const PER_THREAD_FLAG: u64 = 2;

fn proc_address(name: &str, flags: u64) -> *mut c_void {
    let name = CString::new(name).expect("no NUL");
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    // SAFETY: `name` is NUL-terminated; `pfn` and `status` are valid out-pointers.
    let r = unsafe { sys::cuGetProcAddress_v2(name.as_ptr(), &mut pfn, 13000, flags, &mut status) };
    assert_eq!(
        r,
        CUresult::CUDA_SUCCESS,
        "cuGetProcAddress({name:?}, flags {flags})"
    );
    assert!(!pfn.is_null(), "cuGetProcAddress({name:?}) answered NULL");
    pfn
}

fn hold(s: sys::CUstream, word: sys::CUdeviceptr) -> CUresult {
    // SAFETY: `word` is a live 4-byte device allocation; the driver validates the stream.
    unsafe { sys::cuStreamWaitValue32_v2(s, word, 1, 0) }
}

fn memset32(p: sys::CUdeviceptr, value: u32, s: sys::CUstream) -> CUresult {
    // SAFETY: `p` is a live 4-byte range; the driver validates the stream.
    unsafe { sys::cuMemsetD32Async(p, value, 1, s) }
}

fn query(s: sys::CUstream) -> CUresult {
    // SAFETY: the driver validates the stream.
    unsafe { sys::cuStreamQuery(s) }
}

fn sync(s: sys::CUstream) -> CUresult {
    // SAFETY: the driver validates the stream.
    unsafe { sys::cuStreamSynchronize(s) }
}

/// Polls `query` until it is no longer NOT_READY, for at most 30 s (a safety bound so a
/// driver that never finishes fails the test instead of hanging it, not a timing assertion).
fn settle(query: impl Fn() -> CUresult) -> CUresult {
    let start = Instant::now();
    loop {
        let r = query();
        if r != CUresult::CUDA_ERROR_NOT_READY || start.elapsed() > Duration::from_secs(30) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes 1 to the held word from a non-blocking stream when dropped, releasing every stream
/// waiting on it on every path, a failed assertion included.
struct Release<'a> {
    by: &'a Stream,
    word: sys::CUdeviceptr,
}

impl Release<'_> {
    fn now(&self) -> CUresult {
        // SAFETY: a live stream and a live 4-byte device word.
        unsafe { sys::cuStreamWriteValue32_v2(self.by.raw(), self.word, 1, 0) }
    }
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let _ = self.now();
    }
}

#[test]
fn the_per_thread_flag_answers_different_functions_for_calls_that_use_a_stream() {
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    for name in [
        "cuLaunchKernel",
        "cuStreamSynchronize",
        "cuMemcpyHtoD",
        "cuMemcpyHtoDAsync",
        "cuMemAllocAsync",
        "cuEventRecord",
    ] {
        let (legacy, per_thread) = (
            proc_address(name, LEGACY_FLAG),
            proc_address(name, PER_THREAD_FLAG),
        );
        steps.check(
            &format!("{name}: a per-thread variant of its own"),
            legacy != per_thread,
            || format!("both {legacy:?}"),
        );
    }
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn per_thread_streams_do_not_wait_for_each_other_but_the_legacy_stream_waits_for_them() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let word = DeviceBuffer::alloc(&ctx, 4).expect("word");
    word.fill(0).expect("clear word");
    let marks = DeviceBuffer::alloc(&ctx, 12).expect("marks");
    marks.fill(0).expect("clear marks");
    let releaser = Stream::new(&ctx).expect("releaser");
    let release = Release {
        by: &releaser,
        word: word.ptr(),
    };
    let mut steps = Steps::default();
    let (queued_tx, queued_rx) = mpsc::channel();
    let (released_tx, released_rx) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let (ctx, word, marks) = (&ctx, &word, &marks);
        let other = scope.spawn(move || {
            ctx.bind().expect("bind the context on the other thread");
            let held = hold(per_thread(), word.ptr());
            let marked = memset32(marks.ptr(), 7, per_thread());
            let _ = queued_tx.send((held, marked));
            // Synchronize only once released (or after the safety bound).
            let _ = released_rx.recv_timeout(Duration::from_secs(60));
            sync(per_thread())
        });
        let (held, marked) = queued_rx.recv().expect("the other thread queued its work");
        steps.expect(
            "the other thread holds its per-thread stream",
            held,
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "and queues a fill behind the hold",
            marked,
            CUresult::CUDA_SUCCESS,
        );

        let r = memset32(marks.ptr() + 4, 9, per_thread());
        steps.expect(
            "a fill on this thread's per-thread stream",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "this thread's per-thread stream finishes while the other's is held",
            settle(|| query(per_thread())),
            CUresult::CUDA_SUCCESS,
        );
        let r = memset32(marks.ptr() + 8, 5, legacy());
        steps.expect("a fill on the legacy stream", r, CUresult::CUDA_SUCCESS);
        steps.expect(
            "the legacy stream waits for the held per-thread stream",
            query(legacy()),
            CUresult::CUDA_ERROR_NOT_READY,
        );
        steps.expect("release the hold", release.now(), CUresult::CUDA_SUCCESS);
        steps.expect(
            "the legacy stream then finishes",
            sync(legacy()),
            CUresult::CUDA_SUCCESS,
        );
        let _ = released_tx.send(());
        let r = other.join().expect("the other thread");
        steps.expect(
            "the other thread's per-thread stream finishes",
            r,
            CUresult::CUDA_SUCCESS,
        );
    });
    let got: Vec<u32> = marks
        .to_vec()
        .expect("read marks")
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    steps.check("every fill ran", got == [7, 9, 5], || format!("{got:?}"));
    steps.finish(&env.choice.kind.to_string());
}

type LaunchKernel = unsafe extern "C" fn(
    sys::CUfunction,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    sys::CUstream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CUresult;
type OnStream = unsafe extern "C" fn(sys::CUstream) -> CUresult;
type CopyToHost = unsafe extern "C" fn(*mut c_void, sys::CUdeviceptr, usize) -> CUresult;
type CopyToDevice = unsafe extern "C" fn(sys::CUdeviceptr, *const c_void, usize) -> CUresult;

#[test]
fn a_ptsz_launch_on_null_runs_on_the_per_thread_stream_and_ptds_copies_follow_it() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let module = Module::load_ptx(&ctx, &clang_ptx("saxpy")).expect("load saxpy");
    let saxpy = module.function("saxpy").expect("saxpy");
    // SAFETY: at CUDA 13 with the per-thread flag these names answer the `_ptsz` / `_ptds`
    // variants, whose C signatures are the legacy functions' ones written here.
    let (launch, query_pt, sync_pt, to_host, to_device) = unsafe {
        (
            std::mem::transmute::<*mut c_void, LaunchKernel>(proc_address(
                "cuLaunchKernel",
                PER_THREAD_FLAG,
            )),
            std::mem::transmute::<*mut c_void, OnStream>(proc_address(
                "cuStreamQuery",
                PER_THREAD_FLAG,
            )),
            std::mem::transmute::<*mut c_void, OnStream>(proc_address(
                "cuStreamSynchronize",
                PER_THREAD_FLAG,
            )),
            std::mem::transmute::<*mut c_void, CopyToHost>(proc_address(
                "cuMemcpyDtoH",
                PER_THREAD_FLAG,
            )),
            std::mem::transmute::<*mut c_void, CopyToDevice>(proc_address(
                "cuMemcpyHtoD",
                PER_THREAD_FLAG,
            )),
        )
    };
    let n = 512usize;
    let word = DeviceBuffer::alloc(&ctx, 4).expect("word");
    word.fill(0).expect("clear word");
    let x = DeviceBuffer::alloc(&ctx, n * 4).expect("x");
    let y = DeviceBuffer::alloc(&ctx, n * 4).expect("y");
    let releaser = Stream::new(&ctx).expect("releaser");
    let release = Release {
        by: &releaser,
        word: word.ptr(),
    };
    let mut steps = Steps::default();
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    let zeros = vec![0u8; n * 4];
    // SAFETY: the host buffers hold n floats; the device buffers are n floats.
    let r = unsafe { to_device(x.ptr(), ones.as_ptr().cast(), n * 4) };
    steps.expect("cuMemcpyHtoD_v2_ptds(x)", r, CUresult::CUDA_SUCCESS);
    // SAFETY: as above.
    let r = unsafe { to_device(y.ptr(), zeros.as_ptr().cast(), n * 4) };
    steps.expect("cuMemcpyHtoD_v2_ptds(y)", r, CUresult::CUDA_SUCCESS);

    steps.expect(
        "hold the per-thread stream",
        hold(per_thread(), word.ptr()),
        CUresult::CUDA_SUCCESS,
    );
    let (mut count, mut a, mut xp, mut yp) = (n as i32, 2.5f32, x.ptr(), y.ptr());
    let mut params: [*mut c_void; 4] = [
        (&raw mut count).cast(),
        (&raw mut a).cast(),
        (&raw mut xp).cast(),
        (&raw mut yp).cast(),
    ];
    // SAFETY: saxpy(int, float, const float*, float*) with its four parameters; the buffers
    // hold n floats and outlive the launch (the stream is synchronized below).
    let r = unsafe {
        launch(
            saxpy.raw(),
            4,
            1,
            1,
            128,
            1,
            1,
            0,
            legacy(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    steps.expect("cuLaunchKernel_ptsz on NULL", r, CUresult::CUDA_SUCCESS);
    // SAFETY: NULL is a valid stream argument.
    let r = unsafe { query_pt(legacy()) };
    steps.expect(
        "the launch waits behind the hold on the per-thread stream",
        r,
        CUresult::CUDA_ERROR_NOT_READY,
    );
    steps.expect("release the hold", release.now(), CUresult::CUDA_SUCCESS);
    // SAFETY: NULL is a valid stream argument.
    let r = unsafe { sync_pt(legacy()) };
    steps.expect("cuStreamSynchronize_ptsz(NULL)", r, CUresult::CUDA_SUCCESS);
    let mut out = vec![0u8; n * 4];
    // SAFETY: `out` holds n floats; `y` is n floats.
    let r = unsafe { to_host(out.as_mut_ptr().cast(), y.ptr(), n * 4) };
    steps.expect("cuMemcpyDtoH_v2_ptds", r, CUresult::CUDA_SUCCESS);
    check_all_f32(&mut steps, "y = 2.5 * 1 + 0 everywhere", &out, 2.5);
    steps.finish(&env.choice.kind.to_string());
}
