//! Primary-context reference counting, reset, stale handles and per-thread current contexts,
//! with the results NVIDIA's driver gives on an H200.

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUresult};
use softcuda::exports::*;

use crate::common::{alloc, fresh_primary, ok, serial};

fn state() -> (u32, i32) {
    let (mut flags, mut active) = (0u32, -1);
    // SAFETY: valid out-pointers.
    ok(unsafe { cuDevicePrimaryCtxGetState(0, &mut flags, &mut active) });
    (flags, active)
}

fn ctx_id(ctx: CUcontext) -> u64 {
    let mut id = 0;
    // SAFETY: valid out-pointer.
    ok(unsafe { cuCtxGetId(ctx, &mut id) });
    id
}

#[test]
fn primary_context_lives_while_retained_and_dies_at_refcount_zero() {
    let _g = serial();
    let ctx = fresh_primary();
    assert_eq!(state().1, 1);
    // SAFETY: valid handles and out-pointers throughout.
    unsafe {
        let mut again: CUcontext = std::ptr::null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut again, 0));
        assert_eq!(again, ctx);
        ok(cuDevicePrimaryCtxRelease_v2(0));
        assert_eq!(state().1, 1, "one reference is left");
        ok(cuDevicePrimaryCtxRelease_v2(0));
        assert_eq!(state().1, 0);
        assert_eq!(
            cuDevicePrimaryCtxRelease_v2(0),
            CUresult::CUDA_ERROR_INVALID_CONTEXT
        );
    }
}

#[test]
fn stale_primary_handle_behaves_like_nvidia_after_reset() {
    let _g = serial();
    let ctx = fresh_primary();
    let first_id = ctx_id(ctx);
    let d = alloc(64);
    // SAFETY: valid handles and out-pointers throughout.
    unsafe {
        ok(cuDevicePrimaryCtxReset_v2(0));
        assert_eq!(state().1, 0);
        // Setting the stale handle current succeeds; work in it then fails.
        ok(cuCtxSetCurrent(ctx));
        let mut cur: CUcontext = std::ptr::null_mut();
        ok(cuCtxGetCurrent(&mut cur));
        assert_eq!(cur, ctx);
        let mut d2: CUdeviceptr = 0;
        assert_eq!(
            cuMemAlloc_v2(&mut d2, 64),
            CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
        );
        // The allocation died with the context.
        assert_eq!(
            cuPointerGetAttribute((&mut d2 as *mut u64).cast(), 11, d),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        // Re-retaining gives the same handle value and a new context id.
        let mut again: CUcontext = std::ptr::null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut again, 0));
        assert_eq!(again, ctx);
        assert_ne!(ctx_id(ctx), first_id);
        ok(cuMemAlloc_v2(&mut d2, 64));
        ok(cuMemFree_v2(d2));
    }
}

#[test]
fn primary_flags_are_reported_by_get_state() {
    let _g = serial();
    fresh_primary();
    // SAFETY: plain calls.
    unsafe {
        ok(cuDevicePrimaryCtxSetFlags_v2(0, 4));
        assert_eq!(state(), (4, 1));
        let mut f = 0;
        ok(cuCtxGetFlags(&mut f));
        assert_eq!(f, 4);
        assert_eq!(
            cuDevicePrimaryCtxSetFlags_v2(0, 3),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuDevicePrimaryCtxSetFlags_v2(0, 0));
    }
}

#[test]
fn current_context_is_per_thread() {
    let _g = serial();
    let ctx = fresh_primary();
    let other = std::thread::spawn(|| {
        let mut cur: CUcontext = std::ptr::dangling_mut();
        // SAFETY: valid out-pointers.
        unsafe {
            ok(cuCtxGetCurrent(&mut cur));
            assert!(cur.is_null(), "a new thread has no current context");
            let mut d: CUdeviceptr = 0;
            assert_eq!(
                cuMemAlloc_v2(&mut d, 16),
                CUresult::CUDA_ERROR_INVALID_CONTEXT
            );
        }
        cur.addr()
    })
    .join()
    .unwrap();
    assert_eq!(other, 0);
    let mut cur: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { cuCtxGetCurrent(&mut cur) });
    assert_eq!(cur, ctx);
}

#[test]
fn created_contexts_push_and_pop_on_the_thread_stack() {
    let _g = serial();
    let primary = fresh_primary();
    // SAFETY: valid handles and out-pointers throughout.
    unsafe {
        let mut created: CUcontext = std::ptr::null_mut();
        ok(cuCtxCreate_v2(&mut created, 0, 0));
        assert_ne!(created, primary);
        let mut cur: CUcontext = std::ptr::null_mut();
        ok(cuCtxGetCurrent(&mut cur));
        assert_eq!(cur, created, "cuCtxCreate makes the new context current");
        assert_ne!(ctx_id(created), ctx_id(primary));
        let mut popped: CUcontext = std::ptr::null_mut();
        ok(cuCtxPopCurrent_v2(&mut popped));
        assert_eq!(popped, created);
        ok(cuCtxGetCurrent(&mut cur));
        assert_eq!(cur, primary);
        ok(cuCtxPushCurrent_v2(created));
        ok(cuCtxDestroy_v2(created));
        ok(cuCtxGetCurrent(&mut cur));
        assert_eq!(cur, primary, "destroying the current context pops it");
        assert_eq!(
            cuCtxDestroy_v2(created),
            CUresult::CUDA_ERROR_INVALID_CONTEXT
        );
        assert_eq!(
            cuCtxSetCurrent(created),
            CUresult::CUDA_ERROR_INVALID_CONTEXT
        );
        assert_eq!(
            cuCtxDestroy_v2(primary),
            CUresult::CUDA_ERROR_INVALID_CONTEXT
        );
    }
}

#[test]
fn limits_round_trip_and_unknown_limit_is_unsupported() {
    let _g = serial();
    fresh_primary();
    // SAFETY: valid out-pointers.
    unsafe {
        let mut v = 0usize;
        ok(cuCtxGetLimit(&mut v, 0));
        assert_eq!(v, 1024);
        ok(cuCtxSetLimit(0, 4096));
        ok(cuCtxGetLimit(&mut v, 0));
        assert_eq!(v, 4096);
        assert_eq!(
            cuCtxGetLimit(&mut v, 99),
            CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT
        );
        let mut ver = 0;
        ok(cuCtxGetApiVersion(std::ptr::null_mut(), &mut ver));
        assert_eq!(ver, 3020);
    }
}
