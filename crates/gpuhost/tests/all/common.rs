//! Shared fixtures: the host (or a failure without a driver), bundle paths, a lock that keeps tests which
//! tear the context down from running beside the others, and running a test in its own process.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use gpuhost::{Error, Host};

static CONTEXT: RwLock<()> = RwLock::new(());

/// Tests that only use the context share it.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    CONTEXT.read().unwrap_or_else(|p| p.into_inner())
}

/// Tests that destroy or reset the context run alone.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    CONTEXT.write().unwrap_or_else(|p| p.into_inner())
}

pub use testkit::in_child;

/// The host's counters once the work of earlier tests has been retired: their last batches may
/// still be with the completion thread (holding their buffers) when they return.
pub fn settled_stats(host: &Host) -> gpuhost::HostStats {
    host.synchronize().expect("synchronize");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let s = host.stats();
        if s.pending_launches == 0 || std::time::Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The host of device 0. Without a driver this fails the test, or returns None after printing
/// "skipped: no driver" where `GPUHOST_TEST_ALLOW_SKIP=1` allows it (testkit's one rule).
pub fn host() -> Option<Arc<Host>> {
    match gpuhost::host(0) {
        Ok(h) => Some(h),
        Err(e @ Error::NoDriver { .. }) if !is_incomplete_driver(&e) => {
            testkit::driver_or_skip(Err(e))
        }
        Err(e) => panic!("host(0) failed with a driver present: {e}"),
    }
}

fn is_incomplete_driver(e: &Error) -> bool {
    matches!(e, Error::NoDriver { reason } if reason.starts_with(gpuhost::INCOMPLETE_DRIVER))
}

/// A bundle directory of this crate.
pub fn bundle(name: &str) -> PathBuf {
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .expect("CARGO_MANIFEST_DIR is set by cargo and .gpu/run.sh");
    PathBuf::from(dir).join("bundles").join(name)
}

/// The tag bundle `stamp-a` / `stamp-b` writes: out[i] = tag + i.
pub const TAG_A: u32 = 0xA000_0000;
pub const TAG_B: u32 = 0xB000_0000;

/// Read `n` u32s from a buffer.
pub fn read_u32s(buf: &gpuhost::DeviceBuffer, n: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; n * 4];
    buf.read(0, &mut bytes).expect("read back");
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Launch `stamp` over `n` elements of `out` and wait; returns what it wrote.
pub fn stamp(
    stream: &gpuhost::Stream,
    kernel: &gpuhost::Kernel,
    out: &gpuhost::DeviceBuffer,
    n: u32,
) -> gpuhost::Result<Vec<u32>> {
    stream
        .launch(
            kernel,
            gpuhost::LaunchConfig::for_elements(n, 64),
            &[gpuhost::Arg::Buffer(out, 0), gpuhost::Arg::U32(n)],
        )?
        .wait()?;
    Ok(read_u32s(out, n as usize))
}

/// The expected output of a stamp bundle.
pub fn expected(tag: u32, n: u32) -> Vec<u32> {
    (0..n).map(|i| tag + i).collect()
}

/// Bytes that differ at every position and from one seed to the next.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

/// Runs a future on a fresh single-threaded runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// A two-worker runtime with timers, for tasks that run while the test thread resets the context.
pub fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Device 0's handle.
pub fn device() -> gpuhost::sys::CUdevice {
    let mut dev = 0;
    // SAFETY: the driver is loaded and initialised (host() succeeded); valid out pointer.
    let r = unsafe { gpuhost::sys::cuDeviceGet(&mut dev, 0) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
    dev
}

/// Resets device 0's primary context under the host, as a foreign library would.
pub fn foreign_reset() {
    // SAFETY: a foreign reset, on purpose: destroys the context with all its objects.
    let r = unsafe { gpuhost::sys::cuDevicePrimaryCtxReset_v2(device()) };
    assert_eq!(r, gpuhost::sys::CUresult::CUDA_SUCCESS);
}

/// Memory of its own mapping (filled with a `pattern`), so that access to it can be revoked
/// (`forbid_access`), or handed to `Host::lock_memory` as its own owner.
pub struct Mapped {
    ptr: *mut u8,
    len: usize,
}

impl Mapped {
    pub fn new(len: usize) -> Self {
        Self::filled(len, 1)
    }

    /// `len` bytes filled with `pattern(len, seed)`.
    pub fn filled(len: usize, seed: u32) -> Self {
        // SAFETY: a fresh private anonymous mapping; no address hint.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        let m = Self {
            ptr: ptr.cast(),
            len,
        };
        // SAFETY: `len` readable, writable bytes just mapped, not shared with anyone yet.
        unsafe { std::slice::from_raw_parts_mut(m.ptr, len) }.copy_from_slice(&pattern(len, seed));
        m
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes, readable until `forbid_access` (which needs every
        // borrow from here to have ended) and unmapped only on drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Takes `&mut self`, so no borrow from `bytes` outlives it.
    pub fn forbid_access(&mut self) {
        // SAFETY: our own mapping; no borrow of it is alive (`&mut self`).
        let r = unsafe { libc::mprotect(self.ptr.cast(), self.len, libc::PROT_NONE) };
        assert_eq!(r, 0);
    }
}

// SAFETY: plain memory owned by this value; tests read or write it only while no transfer does.
unsafe impl Send for Mapped {}
// SAFETY: as above; the value itself is never mutated through a shared reference.
unsafe impl Sync for Mapped {}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: mapped by `new` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
