//! Shared test plumbing: driver selection with the skip rule, running a test in its own process,
//! a gate that holds a stream back, a primary-context reset guard, a fresh thread to run on, and
//! raw-call helpers for the semantics tests.

use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLockWriteGuard};
use std::time::Duration;

use conformance::driver::{self, Env};
use cudarc::driver::sys::{self, CUresult};

/// The driver. Without one this fails the test, or returns `None` after printing
/// `skipped: no driver` where `GPUHOST_TEST_ALLOW_SKIP=1` allows it (testkit's one rule) —
/// except that a driver `GPUHOST_DRIVER` asked for explicitly always fails the test if missing.
pub fn env_or_skip() -> Option<&'static Env> {
    match driver::env() {
        Ok(env) => Some(env),
        Err(e) if !driver::preference_is_explicit() => testkit::driver_or_skip(Err(e)),
        Err(e) => panic!("GPUHOST_DRIVER asked for a driver that did not load: {e}"),
    }
}

pub use testkit::in_child;

/// Held by every test that blocks a stream with a [`Gate`]: such a test runs alone (it holds the
/// exclusive device lock). A held gate stalls more than its stream. NVIDIA's driver runs a
/// context's host functions on one thread, so other tests' host functions wait behind it, and
/// the legacy default stream waits for blocking streams, so every synchronous copy or memset
/// of another test waits too. Tests running beside it would time out.
pub struct GateLock {
    _alone: RwLockWriteGuard<'static, ()>,
}

/// Takes the [`GateLock`].
pub fn gate_lock() -> GateLock {
    GateLock {
        _alone: conformance::driver::exclusive_device(),
    }
}

/// A host function's wait point: work queued behind [`Gate::hold`] on a stream does not run
/// until [`Gate::open`] (or a 60 s safety timeout, so a failing test cannot hang the run).
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    /// A closed gate; the [`GateLock`] proves no other test runs meanwhile.
    pub fn new(_serial: &GateLock) -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// Enqueues a host function on `stream` that blocks until the gate opens.
    pub fn hold(self: &Arc<Self>, stream: &conformance::stream::Stream) {
        let gate = Arc::clone(self);
        stream
            .launch_host_fn(move || {
                let open = gate.open.lock().unwrap_or_else(PoisonError::into_inner);
                let _unused = gate
                    .cv
                    .wait_timeout_while(open, Duration::from_secs(60), |o| !*o)
                    .unwrap_or_else(PoisonError::into_inner);
            })
            .expect("cuLaunchHostFunc");
    }

    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_all();
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

/// Opens the gate when dropped, so a failed assertion never leaves a stream blocked.
pub struct OpenOnDrop(pub Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Resets the primary context when dropped: tests that poison or destroy it leave a clean one
/// behind on every path, including a failed assertion.
pub struct ResetOnDrop(pub sys::CUdevice);

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        // SAFETY: the device handle came from cuDeviceGet; reset has no other precondition, and
        // the caller holds the exclusive device lock so no other test uses the context.
        let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(self.0) };
        if r != CUresult::CUDA_SUCCESS {
            eprintln!("cuDevicePrimaryCtxReset in cleanup returned {r:?}");
        }
    }
}

/// The driver's code of a call's outcome (`CUDA_SUCCESS` for `Ok`).
pub fn code(r: conformance::Result<()>) -> CUresult {
    match r {
        Ok(()) => CUresult::CUDA_SUCCESS,
        Err(e) => e
            .code()
            .unwrap_or_else(|| panic!("not a driver error: {e}")),
    }
}

/// Collects every expectation of a multi-step test, so one run reports all steps that differ
/// from NVIDIA's documented/observed behaviour instead of stopping at the first.
#[derive(Default)]
pub struct Steps {
    failures: Vec<String>,
}

impl Steps {
    pub fn expect(&mut self, step: &str, got: CUresult, want: CUresult) {
        if got != want {
            self.failures
                .push(format!("{step}: got {got:?}, want {want:?}"));
        }
    }

    /// For a step where NVIDIA's own answer varies between runs: any of `wants` is right.
    pub fn expect_any(&mut self, step: &str, got: CUresult, wants: &[CUresult]) {
        if !wants.contains(&got) {
            self.failures
                .push(format!("{step}: got {got:?}, want one of {wants:?}"));
        }
    }

    pub fn check(&mut self, step: &str, ok: bool, detail: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(format!("{step}: {}", detail()));
        }
    }

    pub fn finish(self, driver: &str) {
        assert!(
            self.failures.is_empty(),
            "on {driver}, {} step(s) differ:\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        );
    }
}

/// Checks that every little-endian `f32` in `bytes` is `want` (a kernel's output).
pub fn check_all_f32(steps: &mut Steps, step: &str, bytes: &[u8], want: f32) {
    let got: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    steps.check(step, got.iter().all(|&v| v == want), || {
        format!("first values {:?}", &got[..got.len().min(8)])
    });
}

/// `cuMemAlloc` of `bytes` in the current context; frees on success. Returns the raw result.
pub fn try_alloc(bytes: usize) -> CUresult {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer; the call only reads the thread's current context.
    let r = unsafe { sys::cuMemAlloc_v2(&mut p, bytes) };
    if r == CUresult::CUDA_SUCCESS {
        // SAFETY: `p` was just allocated by cuMemAlloc and is freed once.
        let f = unsafe { sys::cuMemFree_v2(p) };
        assert_eq!(f, CUresult::CUDA_SUCCESS, "cuMemFree of a fresh allocation");
    }
    r
}

/// `cuCtxGetId(ctx)`.
pub fn ctx_id(ctx: sys::CUcontext) -> Result<u64, CUresult> {
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: `id` is a valid out-pointer; the driver validates `ctx`.
    let r = unsafe { sys::cuCtxGetId(ctx, &mut id) };
    if r == CUresult::CUDA_SUCCESS {
        Ok(id)
    } else {
        Err(r)
    }
}

/// `cuDevicePrimaryCtxGetState(dev)` as (flags, active).
pub fn primary_state(dev: sys::CUdevice) -> (u32, bool) {
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: both are valid out-pointers; `dev` came from cuDeviceGet.
    let r = unsafe { sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuDevicePrimaryCtxGetState");
    (flags, active != 0)
}

/// PTX of the conformance tests' own kernels (tests/kernels/<name>.ptx, made by its gen.sh).
pub fn own_ptx(name: &str) -> String {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo"));
    let path = dir.join("tests/kernels").join(format!("{name}.ptx"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The clang flavour of a corpus fixture (always committed).
pub fn clang_ptx(file: &str) -> String {
    conformance::corpus::read_ptx(file, conformance::corpus::Flavour::Clang)
        .expect("corpus fixture")
}

/// Loads `corpus/clang/<file>.ptx` into the current context with raw calls. The handle is never
/// unloaded: tests using this destroy the context, which is what they probe.
pub fn raw_load_module(file: &str) -> sys::CUmodule {
    let ptx = std::ffi::CString::new(clang_ptx(file)).expect("no NUL in PTX");
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `module` is a valid out-pointer and `ptx` a NUL-terminated image that outlives the call.
    let r = unsafe { sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuModuleLoadData({file})");
    module
}

/// `cuModuleGetFunction(module, name)`'s raw result; the driver validates `module`, which may
/// be stale on purpose.
pub fn raw_get_function(module: sys::CUmodule, name: &str) -> CUresult {
    let name = std::ffi::CString::new(name).expect("no NUL in name");
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: `f` is a valid out-pointer and `name` is NUL-terminated.
    unsafe { sys::cuModuleGetFunction(&mut f, module, name.as_ptr()) }
}

/// `cuMemAlloc` in the current context, deliberately never freed: the caller destroys the context.
pub fn raw_alloc_leaked(bytes: usize) -> sys::CUdeviceptr {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer.
    let r = unsafe { sys::cuMemAlloc_v2(&mut p, bytes) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemAlloc({bytes})");
    p
}

/// `cuMemGetInfo`'s free bytes in the current context.
pub fn free_bytes() -> usize {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both are valid out-pointers.
    let r = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemGetInfo");
    free
}

/// Runs `body` on a fresh thread (created contexts are pushed on the calling thread's stack, so
/// the test thread's stack stays as it was) and fails with every step that differed.
pub fn on_fresh_thread(body: impl FnOnce(sys::CUdevice, &mut Steps) + Send + 'static) {
    let _shared = driver::shared_device();
    let Some(env) = env_or_skip() else { return };
    let device = env.device;
    let steps = std::thread::spawn(move || {
        let mut steps = Steps::default();
        body(device, &mut steps);
        steps
    })
    .join()
    .expect("thread");
    steps.finish(&env.choice.kind.to_string());
}
