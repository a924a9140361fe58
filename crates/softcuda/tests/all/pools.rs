//! Memory pools and the per-thread default stream at the C boundary: every malformed argument
//! gets its documented CUresult (never a panic), and the `_ptds` / `_ptsz` exports use the
//! calling thread's own stream. (Their behaviour against NVIDIA's is conformance's `pools` and
//! `per_thread`.)

use std::ffi::c_void;

use cudarc::driver::sys::{CUdeviceptr, CUresult, CUstream};
use softcuda::exports::*;

use crate::common::{alloc, fresh_primary, ok, serial, stream};

fn props() -> RawPoolProps {
    RawPoolProps {
        alloc_type: 1,
        handle_types: 0,
        location_type: 1,
        location_id: 0,
        win32_security_attributes: std::ptr::null_mut(),
        max_size: 0,
        usage: 0,
        reserved: [0; 54],
    }
}

/// A malformed-properties case: what it is, how it spoils the properties, the answer.
type Case = (&'static str, fn(&mut RawPoolProps), CUresult);

fn create(p: &RawPoolProps) -> (CUresult, *mut c_void) {
    let mut pool = std::ptr::null_mut();
    // SAFETY: valid out-pointer and properties.
    (unsafe { cuMemPoolCreate(&mut pool, p) }, pool)
}

#[test]
fn malformed_pool_arguments_get_their_documented_errors() {
    let _g = serial();
    fresh_primary();
    let bad = CUresult::CUDA_ERROR_INVALID_VALUE;
    let cases: [Case; 6] = [
        ("allocation type 0", |p| p.alloc_type = 0, bad),
        ("device 7", |p| p.location_id = 7, bad),
        ("location type 9", |p| p.location_type = 9, bad),
        ("reserved bytes set", |p| p.reserved[3] = 1, bad),
        (
            "a host pool",
            |p| p.location_type = 2,
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
        ),
        (
            "an IPC pool",
            |p| p.handle_types = 1,
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
        ),
    ];
    for (what, change, want) in cases {
        let mut p = props();
        change(&mut p);
        assert_eq!(create(&p).0, want, "{what}");
    }
    let mut pool = std::ptr::null_mut();
    // SAFETY: NULL pointers on purpose: the driver refuses them.
    unsafe {
        assert_eq!(cuMemPoolCreate(&mut pool, std::ptr::null()), bad);
        assert_eq!(cuMemPoolCreate(std::ptr::null_mut(), &props()), bad);
    }
    let (r, pool) = create(&props());
    ok(r);
    let mut v = 0u64;
    // SAFETY: unknown attributes, NULL values and dead handles are refused before any access.
    unsafe {
        assert_eq!(cuMemPoolGetAttribute(pool, 99, (&raw mut v).cast()), bad);
        assert_eq!(cuMemPoolGetAttribute(pool, 4, std::ptr::null_mut()), bad);
        assert_eq!(cuMemPoolSetAttribute(pool, 4, std::ptr::null_mut()), bad);
        assert_eq!(cuMemPoolTrimTo(std::ptr::null_mut(), 0), bad);
        let mut d: CUdeviceptr = 0;
        assert_eq!(
            cuMemAllocFromPoolAsync(&mut d, 64, std::ptr::null_mut(), std::ptr::null_mut()),
            bad
        );
        assert_eq!(cuDeviceSetMemPool(0, std::ptr::null_mut()), bad);
        assert_eq!(
            cuDeviceSetMemPool(5, pool),
            CUresult::CUDA_ERROR_INVALID_DEVICE
        );
        ok(cuMemPoolDestroy(pool));
        assert_eq!(cuMemPoolDestroy(pool), bad);
        assert_eq!(cuMemPoolGetAttribute(pool, 4, (&raw mut v).cast()), bad);
    }
}

#[test]
fn a_pool_at_its_max_size_is_out_of_memory_and_every_second_free_is_refused() {
    let _g = serial();
    fresh_primary();
    let (r, pool) = create(&RawPoolProps {
        max_size: 4 << 20,
        ..props()
    });
    ok(r);
    let s = stream(1);
    let (mut a, mut b): (CUdeviceptr, CUdeviceptr) = (0, 0);
    let mut used = 0u64;
    // SAFETY: valid out-pointers, pool and stream.
    unsafe {
        ok(cuMemAllocFromPoolAsync(&mut a, 3 << 20, pool, s));
        assert_eq!(
            cuMemAllocFromPoolAsync(&mut b, 3 << 20, pool, s),
            CUresult::CUDA_ERROR_OUT_OF_MEMORY
        );
        ok(cuMemFree_v2(a));
        ok(cuMemPoolGetAttribute(pool, 7, (&raw mut used).cast()));
        assert_eq!(used, 0, "cuMemFree gave the memory back to the pool");
        assert_eq!(cuMemFreeAsync(a, s), CUresult::CUDA_ERROR_INVALID_VALUE);
        ok(cuMemAllocFromPoolAsync(&mut b, 3 << 20, pool, s));
        ok(cuMemFreeAsync(b, s));
        ok(cuStreamSynchronize(s));
        ok(cuMemPoolDestroy(pool));
        // cuMemAlloc memory freed in stream order: a second free is refused before the first
        // has run (the stream is held by a host function until then).
        let d = alloc(64);
        ok(cuLaunchHostFunc(s, Some(pause), std::ptr::null_mut()));
        ok(cuMemFreeAsync(d, s));
        assert_eq!(cuMemFreeAsync(d, s), CUresult::CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemFree_v2(d), CUresult::CUDA_ERROR_INVALID_VALUE);
        ok(cuStreamSynchronize(s));
        assert_eq!(cuMemFreeAsync(d, s), CUresult::CUDA_ERROR_INVALID_VALUE);
        ok(cuStreamDestroy_v2(s));
    }
}

/// A host function that keeps its stream busy for a moment, so the calls after it are made
/// while the stream's earlier work has not run (what the checks must not depend on).
unsafe extern "C" fn pause(_: *mut c_void) {
    std::thread::sleep(std::time::Duration::from_millis(50));
}

#[test]
fn ptds_and_ptsz_calls_use_a_stream_of_the_calling_thread() {
    let _g = serial();
    let ctx = fresh_primary().expose_provenance();
    let d = alloc(8);
    let per_thread: CUstream = std::ptr::without_provenance_mut(0x2);
    // SAFETY: `d` holds 8 bytes; the streams are default-stream handles.
    unsafe {
        ok(cuMemsetD32_v2_ptds(d, 7, 1));
        ok(cuMemsetD32Async_ptsz(d + 4, 9, 1, std::ptr::null_mut()));
        ok(cuStreamSynchronize_ptsz(std::ptr::null_mut()));
        ok(cuStreamSynchronize(per_thread));
        let mut flags = 99;
        ok(cuStreamGetFlags(per_thread, &mut flags));
        assert_eq!(flags, 0, "the per-thread stream is a blocking stream");
        assert_eq!(
            cuStreamDestroy_v2(per_thread),
            CUresult::CUDA_ERROR_INVALID_HANDLE
        );
    }
    // Another thread's per-thread stream is its own and goes when the thread ends.
    std::thread::spawn(move || {
        // SAFETY: the context is live for the test; `d` holds 8 bytes.
        unsafe {
            ok(cuCtxSetCurrent(std::ptr::with_exposed_provenance_mut(ctx)));
            let per_thread: CUstream = std::ptr::without_provenance_mut(0x2);
            ok(cuMemsetD32Async(d, 5, 1, per_thread));
            ok(cuStreamSynchronize(per_thread));
        }
    })
    .join()
    .expect("thread");
    let mut host = [0u32; 2];
    // SAFETY: `host` holds 8 bytes; `d` is live.
    ok(unsafe { cuMemcpyDtoH_v2_ptds(host.as_mut_ptr().cast(), d, 8) });
    assert_eq!(host, [5, 9]);
    // SAFETY: `d` was allocated above.
    ok(unsafe { cuMemFree_v2(d) });
}
