//! Integration tests of gpuhost-wasm: real guests (built from examples/guests and tests/guests) on the real
//! driver chosen by softcuda's loader (softcuda in CI, NVIDIA's on a GPU machine).

mod bound;
mod bursts;
mod concurrency;
mod device;
mod errors;
mod examples;
mod leaks;
mod loading;
mod module_cache;
mod redteam;
mod stream_reads;
mod transfers;
mod twice;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use gpuhost_wasm::{Guest, RunOptions, RunOutcome, Runtime};

/// The shared runtime on device 0. Without a driver this fails the test, or returns None after
/// printing `skipped: no driver` where `GPUHOST_TEST_ALLOW_SKIP=1` allows it (testkit's rule).
pub fn runtime() -> Option<&'static Runtime> {
    static RT: OnceLock<Result<Runtime, String>> = OnceLock::new();
    let found = RT.get_or_init(|| match gpuhost::host(0) {
        Ok(host) => Ok(Runtime::new(host).expect("runtime setup")),
        Err(e) => Err(e.to_string()),
    });
    testkit::driver_or_skip(found.as_ref())
}

/// Tests share the device; the leak test counts the host's handles, so it runs alone.
static DEVICE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The runtime, shared with other tests (None when there is no driver).
pub async fn device() -> Option<(&'static Runtime, tokio::sync::RwLockReadGuard<'static, ()>)> {
    let rt = runtime()?;
    Some((rt, DEVICE.read().await))
}

/// The runtime, with no other test using the device meanwhile.
pub async fn device_alone() -> Option<(&'static Runtime, tokio::sync::RwLockWriteGuard<'static, ()>)>
{
    let rt = runtime()?;
    Some((rt, DEVICE.write().await))
}

/// Folder of the guest .wasm files (examples/guests and this crate's tests/guests, both built
/// into target/guests), built once per test run.
pub fn guest_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo"));
        let root = manifest.join("../..");
        guest_build::build_workspace(&root, "crates/gpuhost-wasm/tests/guests")
            .and_then(|_| guest_build::build(&root))
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// A compiled guest by name (compiled once per test run).
pub fn guest(name: &str) -> Guest {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<OnceLock<Guest>>>>> = OnceLock::new();
    let slot = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(name.into())
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let path = guest_dir().join(format!("{name}.wasm"));
        runtime()
            .expect("driver")
            .load_file(&path)
            .unwrap_or_else(|e| panic!("{e}"))
    })
    .clone()
}

/// Compiles the guests `names` at once, one thread each (compiling is most of a fresh test
/// process's start-up).
pub fn prewarm(names: &[&str]) {
    std::thread::scope(|s| {
        for n in names {
            s.spawn(move || guest(n));
        }
    });
}

/// Runs `name` with `args` (argv[0] added) and default options.
pub async fn run(
    rt: &Runtime,
    name: &str,
    args: &[&str],
) -> Result<RunOutcome, gpuhost_wasm::Error> {
    rt.run(&guest(name), opts(name, args)).await
}

/// Default options: the guest's output captured, default limits.
pub fn opts(name: &str, args: &[&str]) -> RunOptions {
    let mut argv = vec![name.to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    RunOptions {
        args: argv,
        ..RunOptions::default()
    }
}

/// Resets device 0's primary context behind the runtime's back, as another part of the process
/// might: every context handle of the process dies with it. Only in a child process
/// (`redteam::in_child`), with no guest running.
pub fn foreign_reset() {
    let mut dev = 0;
    // SAFETY: the driver is loaded (the runtime runs on it); a valid out pointer.
    let r = unsafe { gpuhost::sys::cuDeviceGet(&mut dev, 0) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
    // SAFETY: a foreign reset, on purpose; the caller runs it alone in its process.
    let r = unsafe { gpuhost::sys::cuDevicePrimaryCtxReset_v2(dev) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
}

/// The guest's stdout as text.
pub fn stdout(o: &RunOutcome) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts a run exited 0 and printed `want` (stderr shown on failure).
pub fn assert_ok(o: &RunOutcome, want: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.exit_code,
        0,
        "guest failed: stdout {:?} stderr {err:?}",
        stdout(o)
    );
    assert!(
        stdout(o).contains(want),
        "stdout {:?} lacks {want:?}; stderr {err:?}",
        stdout(o)
    );
}
