//! Process-wide driver state: whether `cuInit` ran, the configured device memory size, and the
//! handle counter every driver object draws from.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;

/// The environment variable giving the device memory size in bytes.
pub(crate) const MEMORY_ENV: &str = "SOFTCUDA_MEMORY";

/// The number in environment variable `name`, if it is set to one (spaces around it allowed).
fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The environment variable giving the number of devices (default 1).
pub(crate) const DEVICES_ENV: &str = "SOFTCUDA_DEVICES";

/// Most devices `SOFTCUDA_DEVICES` may ask for.
pub(crate) const MAX_DEVICES: usize = 8;

/// Number of devices: `SOFTCUDA_DEVICES` (read once; 1..=8, anything else means 1).
pub(crate) fn device_count() -> i32 {
    static COUNT: OnceLock<i32> = OnceLock::new();
    *COUNT.get_or_init(|| {
        env_number::<i32>(DEVICES_ENV)
            .filter(|n| (1..=MAX_DEVICES as i32).contains(n))
            .unwrap_or(1)
    })
}

/// Device memory when `SOFTCUDA_MEMORY` is unset: 16 GiB.
const DEFAULT_MEMORY: u64 = 16 << 30;

/// The value cuDriverGetVersion reports (CUDA 13.0): libcudart 13 refuses an older driver.
pub(crate) const DRIVER_VERSION: i32 = 13000;

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// `cuInit`: only flags 0 is valid, as in NVIDIA's driver.
pub(crate) fn init(flags: u32) -> CuResult<()> {
    if flags != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    INITIALIZED.store(true, Ordering::Release);
    Ok(())
}

/// Fails with `CUDA_ERROR_NOT_INITIALIZED` until `cuInit` has succeeded.
pub(crate) fn ensure_init() -> CuResult<()> {
    if INITIALIZED.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_NOT_INITIALIZED)
    }
}

/// Total device memory: `SOFTCUDA_MEMORY` bytes (read once) or 16 GiB.
pub(crate) fn total_memory() -> u64 {
    static TOTAL: OnceLock<u64> = OnceLock::new();
    *TOTAL.get_or_init(|| {
        env_number::<u64>(MEMORY_ENV)
            .filter(|&v| v > 0)
            .unwrap_or(DEFAULT_MEMORY)
    })
}

/// The environment variable giving the per-launch watchdog in milliseconds (0: off).
pub(crate) const WATCHDOG_ENV: &str = "SOFTCUDA_WATCHDOG_MS";

/// Watchdog when `SOFTCUDA_WATCHDOG_MS` is unset: 60 s, far above any test or example kernel
/// but a bound on a runaway one (sandboxed kernels stop far sooner through their abort word).
const DEFAULT_WATCHDOG_MS: u64 = 60_000;

/// How long one launch may run before softcuda stops it with `CUDA_ERROR_LAUNCH_TIMEOUT`
/// (read once; `None` when `SOFTCUDA_WATCHDOG_MS=0`).
pub(crate) fn watchdog() -> Option<std::time::Duration> {
    static MS: OnceLock<u64> = OnceLock::new();
    let ms = *MS.get_or_init(|| env_number(WATCHDOG_ENV).unwrap_or(DEFAULT_WATCHDOG_MS));
    (ms > 0).then(|| std::time::Duration::from_millis(ms))
}

/// The environment variable capping the threads resident on a device at once (residency.rs).
const RESIDENT_THREADS_ENV: &str = "SOFTCUDA_RESIDENT_THREADS";

/// Threads a device holds at once: `SOFTCUDA_RESIDENT_THREADS` (read once; `None` when unset
/// or 0: no limit).
pub(crate) fn resident_threads() -> Option<u64> {
    static ROOM: OnceLock<u64> = OnceLock::new();
    let n = *ROOM.get_or_init(|| env_number(RESIDENT_THREADS_ENV).unwrap_or(0));
    (n > 0).then_some(n)
}

/// CPU threads a kernel's blocks are spread over; also the reported SM count.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The kinds of handle the driver hands out; the tag sits in the low bits of the value so that a
/// stream passed where an event is expected is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    Context = 1,
    Module = 2,
    Function = 3,
    Stream = 4,
    Event = 5,
    Graph = 6,
    GraphNode = 7,
    GraphExec = 8,
    Link = 9,
    MemPool = 10,
    Library = 11,
    Kernel = 12,
    Array = 13,
    TexObject = 14,
    SurfObject = 15,
}

static NEXT_HANDLE: AtomicU64 = AtomicU64::new(16);

/// A fresh handle value, never handed out before in this process (so a stale handle can never
/// reach a newer object).
pub(crate) fn new_handle(tag: Tag) -> u64 {
    let id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
    (id << 4) | tag as u64
}

/// Whether `value` could be a handle of kind `tag` (nonzero, right tag).
pub(crate) fn has_tag(value: u64, tag: Tag) -> bool {
    value != 0 && value & 0xf == tag as u64
}
