//! Context semantics: the current context is per thread, the primary context is
//! reference-counted and destroyed at zero or on reset, and stale handles answer as NVIDIA's
//! driver does (observed on the H200, see issue 3).

use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use cudarc::driver::sys::{self, CUresult};

use crate::support::{
    ResetOnDrop, Steps, ctx_id, env_or_skip, free_bytes, primary_state, raw_alloc_leaked,
    raw_get_function, raw_load_module, try_alloc,
};

/// `cuCtxGetCurrent` on the calling thread, as an address (0: none).
fn current() -> usize {
    let mut c: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `c` is a valid out-pointer.
    let r = unsafe { sys::cuCtxGetCurrent(&mut c) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuCtxGetCurrent");
    c as usize
}

/// Runs `body` on a new thread with the retained primary context's address, and fails with
/// every step that differed. The context stays retained until the thread is joined.
fn on_new_thread(body: impl FnOnce(usize, &mut Steps) + Send + 'static) {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let raw = ctx.raw() as usize;
    let steps = std::thread::spawn(move || {
        let mut steps = Steps::default();
        body(raw, &mut steps);
        steps
    })
    .join()
    .expect("thread");
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn new_thread_has_no_current_context_until_set_current() {
    on_new_thread(|raw, steps| {
        steps.check("no current context on a new thread", current() == 0, || {
            format!("{:#x}", current())
        });
        steps.expect(
            "cuMemAlloc with no current context",
            try_alloc(1024),
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );
        // SAFETY: `raw` is the primary context on_new_thread keeps retained until join.
        let r = unsafe { sys::cuCtxSetCurrent(raw as sys::CUcontext) };
        steps.expect("cuCtxSetCurrent(primary)", r, CUresult::CUDA_SUCCESS);
        steps.check("current is the one set", current() == raw, || {
            format!("{:#x}", current())
        });
        steps.expect(
            "cuMemAlloc after cuCtxSetCurrent",
            try_alloc(1024),
            CUresult::CUDA_SUCCESS,
        );
    });
}

#[test]
fn primary_context_is_refcounted_and_destroyed_at_zero() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let _reset = ResetOnDrop(env.device);
    let mut steps = Steps::default();
    let (_, active) = primary_state(env.device);
    steps.check("inactive before the first retain", !active, || {
        "another test left a retain behind".into()
    });

    let first = Context::primary(env).expect("retain 1");
    let id_first = ctx_id(first.raw());
    steps.check("active after retain", primary_state(env.device).1, || {
        "GetState says inactive".into()
    });
    let second = Context::primary(env).expect("retain 2");
    steps.check(
        "second retain returns the same handle",
        second.raw() == first.raw(),
        || format!("{:?} vs {:?}", second.raw(), first.raw()),
    );
    drop(second);
    steps.check(
        "still active after one of two releases",
        primary_state(env.device).1,
        || "inactive".into(),
    );
    steps.expect(
        "usable after one of two releases",
        try_alloc(4096),
        CUresult::CUDA_SUCCESS,
    );
    // A module and 64 MiB that are never unloaded or freed: the context's destruction must take them.
    let module = raw_load_module("vector_add");
    const SIZE: usize = 64 << 20;
    let free_before = free_bytes();
    raw_alloc_leaked(SIZE);
    let free_with_alloc = free_bytes();
    drop(first);
    steps.check(
        "inactive after the last release",
        !primary_state(env.device).1,
        || "still active".into(),
    );

    let again = Context::primary(env).expect("retain after zero");
    steps.check(
        "active again after re-retain",
        primary_state(env.device).1,
        || "inactive".into(),
    );
    let id_again = ctx_id(again.raw());
    steps.check(
        "a destroyed-and-recreated context has a new id",
        id_first.is_ok() && id_first != id_again,
        || format!("before {id_first:?}, after {id_again:?}"),
    );
    steps.expect(
        "usable after re-retain",
        try_alloc(4096),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "a module of the destroyed context is an invalid handle",
        raw_get_function(module, "vector_add"),
        CUresult::CUDA_ERROR_INVALID_HANDLE,
    );
    let free_after = free_bytes();
    steps.check(
        "the destroyed context's memory came back",
        free_after >= free_with_alloc + SIZE / 2,
        || format!("free: {free_before} before the 64 MiB, {free_with_alloc} with it, {free_after} after destroy + re-retain"),
    );
    drop(again);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn stale_handles_after_reset_answer_as_nvidia_does() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let _reset = ResetOnDrop(env.device);
    let mut steps = Steps::default();
    let ctx = Context::primary(env).expect("retain");
    let stale = ctx.raw();
    let id_before = ctx_id(stale);

    // Loaded with raw calls and never unloaded: the reset destroys it.
    let module = raw_load_module("vector_add");
    let get_function = |module| raw_get_function(module, "vector_add");
    steps.expect(
        "cuModuleGetFunction before reset",
        get_function(module),
        CUresult::CUDA_SUCCESS,
    );

    // SAFETY: the exclusive lock keeps every other test off the device while we reset.
    let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(env.device) };
    steps.expect("cuDevicePrimaryCtxReset", r, CUresult::CUDA_SUCCESS);
    steps.check("inactive after reset", !primary_state(env.device).1, || {
        "still active".into()
    });

    // SAFETY: binding a destroyed context's handle is the behaviour under test; the driver
    // must not dereference it unsafely (NVIDIA returns SUCCESS).
    let r = unsafe { sys::cuCtxSetCurrent(stale) };
    steps.expect("cuCtxSetCurrent(stale)", r, CUresult::CUDA_SUCCESS);
    steps.expect(
        "cuMemAlloc in the stale context",
        try_alloc(1024),
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
    );
    // NVIDIA answers either, from run to run (CONTEXT_IS_DESTROYED seen once on the H200 in
    // bench/h200-runs/2026-11-30-gpush-parallel, INVALID_HANDLE in every run before it).
    steps.expect_any(
        "cuModuleGetFunction(stale module)",
        get_function(module),
        &[
            CUresult::CUDA_ERROR_INVALID_HANDLE,
            CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
        ],
    );

    let again = Context::primary(env).expect("re-retain after reset");
    steps.check(
        "re-retain returns the same handle value",
        again.raw() == stale,
        || format!("{:?} vs {stale:?}", again.raw()),
    );
    let id_after = ctx_id(again.raw());
    steps.check(
        "cuCtxGetId changes across the reset",
        id_before.is_ok() && id_after.is_ok() && id_before != id_after,
        || format!("before {id_before:?}, after {id_after:?}"),
    );
    steps.expect(
        "cuMemAlloc after re-retain",
        try_alloc(1024),
        CUresult::CUDA_SUCCESS,
    );
    // NVIDIA answers either from run to run: INVALID_CONTEXT seen once on the H200 with
    // parallel test threads (bench/h200-runs/2026-12-01-s8/bc8be74-tests), INVALID_HANDLE in
    // every other run. softcuda answers INVALID_HANDLE.
    steps.expect_any(
        "cuModuleGetFunction(stale module) in the new context",
        get_function(module),
        &[
            CUresult::CUDA_ERROR_INVALID_HANDLE,
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        ],
    );
    drop(again);
    drop(ctx);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn context_stack_push_and_pop_are_per_thread() {
    on_new_thread(|raw, steps| {
        // SAFETY: `raw` is the primary context on_new_thread keeps retained until join.
        let r = unsafe { sys::cuCtxPushCurrent_v2(raw as sys::CUcontext) };
        steps.expect("cuCtxPushCurrent", r, CUresult::CUDA_SUCCESS);
        steps.check("pushed context is current", current() == raw, || {
            format!("{:#x}", current())
        });
        steps.expect(
            "cuMemAlloc with a pushed context",
            try_alloc(256),
            CUresult::CUDA_SUCCESS,
        );
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `popped` is a valid out-pointer.
        let r = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        steps.expect("cuCtxPopCurrent", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "pop returns the pushed context",
            popped as usize == raw,
            || format!("{popped:?}"),
        );
        steps.check("nothing current after the pop", current() == 0, || {
            format!("{:#x}", current())
        });
        steps.expect(
            "cuMemAlloc after the pop",
            try_alloc(256),
            CUresult::CUDA_ERROR_INVALID_CONTEXT,
        );
    });
}
