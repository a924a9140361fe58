//! Streams run in order, asynchronously; the legacy default stream synchronizes with blocking
//! streams but not with non-blocking ones; events, cross-stream waits and host functions; with
//! `SOFTCUDA_RESIDENT_THREADS`, kernels wait for room on the device.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUevent, CUresult, CUstream};
use softcuda::exports::*;

use crate::common::{
    alloc, download, fresh_primary, in_child, launch_spin, ok, serial, spin_kernel, stream, upload,
    wait_running, word,
};

type Callback = Box<dyn FnOnce() + Send>;

extern "C" fn trampoline(data: *mut c_void) {
    // SAFETY: `data` came from Box::into_raw in `host` and the driver calls it exactly once.
    let f = unsafe { Box::from_raw(data.cast::<Callback>()) };
    f();
}

/// Queues a Rust closure as a host function.
fn host(s: CUstream, f: impl FnOnce() + Send + 'static) {
    let data = Box::into_raw(Box::new(Box::new(f) as Callback));
    // SAFETY: trampoline consumes exactly this box.
    ok(unsafe { cuLaunchHostFunc(s, Some(trampoline), data.cast()) });
}

fn event(flags: u32) -> CUevent {
    let mut e: CUevent = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { cuEventCreate(&mut e, flags) });
    e
}

fn wait_flag(flag: &AtomicBool, limit: Duration) -> bool {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn host_functions_run_in_order_off_the_calling_thread() {
    let _g = serial();
    fresh_primary();
    let s = stream(0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let caller = std::thread::current().id();
    for i in 0..20 {
        let log = Arc::clone(&log);
        host(s, move || {
            assert_ne!(std::thread::current().id(), caller);
            if i == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            log.lock().unwrap().push(i);
        });
    }
    // SAFETY: valid stream handle.
    unsafe {
        assert_eq!(cuStreamQuery(s), CUresult::CUDA_ERROR_NOT_READY);
        ok(cuStreamSynchronize(s));
        ok(cuStreamQuery(s));
        ok(cuStreamDestroy_v2(s));
        assert_eq!(cuStreamSynchronize(s), CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    assert_eq!(*log.lock().unwrap(), (0..20).collect::<Vec<_>>());
}

/// Work on stream `s` waits for a flag that only later legacy-stream work sets; returns whether
/// it saw the flag (it can only if the legacy stream did not wait for `s`).
fn legacy_stream_waits_for(flags: u32) -> bool {
    fresh_primary();
    let s = stream(flags);
    let set = Arc::new(AtomicBool::new(false));
    let saw = Arc::new(AtomicBool::new(false));
    let (set2, saw2) = (Arc::clone(&set), Arc::clone(&saw));
    host(s, move || {
        saw2.store(
            wait_flag(&set2, Duration::from_millis(500)),
            Ordering::SeqCst,
        )
    });
    host(std::ptr::null_mut(), move || {
        set.store(true, Ordering::SeqCst)
    });
    // SAFETY: valid handles.
    unsafe {
        ok(cuCtxSynchronize());
        ok(cuStreamDestroy_v2(s));
    }
    !saw.load(Ordering::SeqCst)
}

#[test]
fn legacy_default_stream_waits_for_blocking_streams_only() {
    let _g = serial();
    assert!(
        legacy_stream_waits_for(0),
        "NULL-stream work must wait for a blocking stream"
    );
    assert!(
        !legacy_stream_waits_for(1),
        "CU_STREAM_NON_BLOCKING must not be waited for"
    );
}

#[test]
fn events_report_not_ready_then_complete_with_elapsed_time() {
    let _g = serial();
    fresh_primary();
    let s = stream(1);
    let (start, end) = (event(0), event(0));
    // SAFETY: valid handles and out-pointers throughout.
    unsafe {
        let mut ms = 0f32;
        assert_eq!(
            cuEventElapsedTime(&mut ms, start, end),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
        ok(cuEventQuery(start));
        ok(cuEventRecord(start, s));
        host(s, || std::thread::sleep(Duration::from_millis(60)));
        ok(cuEventRecord(end, s));
        assert_eq!(cuEventQuery(end), CUresult::CUDA_ERROR_NOT_READY);
        assert_eq!(
            cuEventElapsedTime(&mut ms, start, end),
            CUresult::CUDA_ERROR_NOT_READY
        );
        ok(cuEventSynchronize(end));
        ok(cuEventQuery(end));
        ok(cuEventElapsedTime(&mut ms, start, end));
        assert!((50.0..5000.0).contains(&ms), "elapsed {ms} ms");
        let untimed = event(2);
        ok(cuEventRecord(untimed, s));
        ok(cuEventSynchronize(untimed));
        assert_eq!(
            cuEventElapsedTime(&mut ms, start, untimed),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
        for e in [start, end, untimed] {
            ok(cuEventDestroy_v2(e));
        }
        assert_eq!(cuEventQuery(start), CUresult::CUDA_ERROR_INVALID_HANDLE);
        ok(cuStreamDestroy_v2(s));
    }
}

#[test]
fn stream_wait_event_orders_work_across_streams() {
    let _g = serial();
    fresh_primary();
    let (a, b) = (stream(1), stream(1));
    let done = Arc::new(AtomicBool::new(false));
    let saw = Arc::new(AtomicBool::new(false));
    let e = event(0);
    let d2 = Arc::clone(&done);
    host(a, move || {
        std::thread::sleep(Duration::from_millis(50));
        d2.store(true, Ordering::SeqCst);
    });
    // SAFETY: valid handles.
    unsafe {
        ok(cuEventRecord(e, a));
        ok(cuStreamWaitEvent(b, e, 0));
    }
    let (d3, s3) = (Arc::clone(&done), Arc::clone(&saw));
    host(b, move || {
        s3.store(d3.load(Ordering::SeqCst), Ordering::SeqCst)
    });
    // SAFETY: valid handles.
    unsafe {
        ok(cuStreamSynchronize(b));
        ok(cuEventDestroy_v2(e));
        ok(cuStreamDestroy_v2(a));
        ok(cuStreamDestroy_v2(b));
    }
    assert!(
        saw.load(Ordering::SeqCst),
        "stream b ran before the event it waited for"
    );
}

#[test]
fn stream_priority_is_clamped_to_the_device_range() {
    let _g = serial();
    fresh_primary();
    // SAFETY: valid out-pointers.
    unsafe {
        let (mut least, mut greatest) = (9, 9);
        ok(cuCtxGetStreamPriorityRange(&mut least, &mut greatest));
        assert_eq!((least, greatest), (0, -5));
        let mut s: CUstream = std::ptr::null_mut();
        ok(cuStreamCreateWithPriority(&mut s, 0, -100));
        let mut p = 0;
        ok(cuStreamGetPriority(s, &mut p));
        assert_eq!(p, -5);
        ok(cuStreamDestroy_v2(s));
    }
}

#[test]
fn with_resident_threads_set_a_kernel_waits_until_a_running_kernel_leaves_it_room() {
    in_child(
        "stream::with_resident_threads_set_a_kernel_waits_until_a_running_kernel_leaves_it_room",
        |cmd| {
            cmd.env("SOFTCUDA_RESIDENT_THREADS", "64");
        },
        || {
            fresh_primary();
            let f = spin_kernel();
            let (a, b) = (stream(1), stream(1));
            // Per kernel: where it shows it runs, the word that lets it end, where it says it did.
            let (ran, go, done) = (alloc(8), alloc(8), alloc(8));
            upload(ran, &[0u32, 0]);
            upload(go, &[0u32, 1]);
            upload(done, &[0u32, 0]);
            let of = |k: u64| [ran + 4 * k, go + 4 * k, done + 4 * k];
            // A's block fills the room and runs until the host lets it end; B is launched only
            // once A runs (streams' workers reach their kernels in no set order).
            launch_spin(f, a, 64, of(0));
            wait_running(ran);
            // B's kernel would end at once (its word is set), but not one of its threads fits.
            launch_spin(f, b, 1, of(1));
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: a live stream.
            let r = unsafe { cuStreamQuery(b) };
            assert_eq!(r, CUresult::CUDA_ERROR_NOT_READY, "B ran beside A");
            assert_eq!(word(ran + 4).load(Ordering::SeqCst), 0, "B began beside A");
            word(go).store(1, Ordering::SeqCst);
            // SAFETY: live streams.
            unsafe {
                ok(cuStreamSynchronize(b));
                ok(cuStreamSynchronize(a));
            }
            let ended: Vec<u32> = download(done, 2);
            assert_eq!(ended, [1, 1], "both kernels ran to their end");
        },
    );
}

#[test]
fn driver_calls_from_a_host_function_are_refused_as_not_permitted_and_the_stream_goes_on() {
    let _g = serial();
    fresh_primary();
    let s = stream(0);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let raw = s as usize;
    host(s, move || {
        let mut d = 0;
        // SAFETY: valid out-pointer and stream handle; both calls must be refused anyway.
        let (alloc, query) = unsafe {
            (
                cuMemAlloc_v2(&mut d, 64),
                cuStreamQuery(std::ptr::with_exposed_provenance_mut(raw)),
            )
        };
        log.lock().unwrap().extend([alloc, query]);
    });
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    host(s, move || flag.store(true, Ordering::SeqCst));
    // SAFETY: valid stream handle.
    ok(unsafe { cuStreamSynchronize(s) });
    assert!(
        done.load(Ordering::SeqCst),
        "the stream ran on past the refusals"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [CUresult::CUDA_ERROR_NOT_PERMITTED; 2],
        "cuda.h forbids driver calls in host functions"
    );
    // The refusal is the host function's alone: this thread's calls go through.
    let d = alloc(64);
    // SAFETY: `d` was allocated above; `s` is a live stream.
    unsafe {
        ok(cuMemFree_v2(d));
        ok(cuStreamDestroy_v2(s));
    }
}
