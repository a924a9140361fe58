//! Reuse of sandboxed guests' device memory: an embedder that runs many short guests with the
//! same limits (`gpuhost serve`, a Store per request) hands their contexts one [`SandboxPool`],
//! and each guest's arena and control block go back to it when its Store is dropped, instead of
//! being unmapped and freed (and the next guest's mapped, zeroed, registered and created anew).
//!
//! Isolation is what a new pair gives: a pair is handed out again only when nothing of the last
//! guest holds it (no buffer, no launch, no watch: their handles are counted), and then every
//! byte a kernel could reach — the arena's whole mapped range and the control block — is zeroed
//! and waited for before the next guest gets it (`Arena::reset_for_reuse`,
//! `ControlBlock::reset_for_reuse`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::confine::{Confinement, arena_bytes};
use crate::limits::Limits;

/// Arenas a guest grew past this many mapped bytes are freed, not kept: the pool holds no more
/// memory than small guests need, and resetting one costs a memset of at most this.
pub const MAX_KEPT_MAPPED: u64 = 8 << 20;

/// A pool of sandbox arenas and control blocks for guests with the same limits on one device.
pub struct SandboxPool {
    host: Arc<gpuhost::Host>,
    arena_bytes: u64,
    kept: usize,
    free: Mutex<VecDeque<(Arc<gpuhost::Arena>, gpuhost::ControlBlock)>>,
    reused: AtomicU64,
    created: AtomicU64,
}

impl SandboxPool {
    /// A pool for sandboxed guests on `host` under `limits`, keeping at most `kept` pairs
    /// (returned ones past that are freed).
    pub fn new(host: Arc<gpuhost::Host>, limits: &Limits, kept: usize) -> Arc<Self> {
        Arc::new(Self {
            host,
            arena_bytes: arena_bytes(limits),
            kept,
            free: Mutex::new(VecDeque::new()),
            reused: AtomicU64::new(0),
            created: AtomicU64::new(0),
        })
    }

    /// Guests that got a reset pair from the pool.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Guests that got a new pair (none was free).
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// Pairs kept now (free, or waiting for the last guest's launches and watch to let go);
    /// each holds its control block's buffer and its arena's mapped memory.
    pub fn kept(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(Arc<gpuhost::Arena>, gpuhost::ControlBlock)>> {
        // Each critical section is one push or pop.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a guest on `host` under `limits` may use this pool (the arena size matches).
    pub fn serves(&self, host: &Arc<gpuhost::Host>, limits: &Limits) -> bool {
        Arc::ptr_eq(&self.host, host) && self.arena_bytes == arena_bytes(limits)
    }

    /// A guest's confinement: a free pair reset for it, else a new one.
    pub(crate) fn confinement(
        self: &Arc<Self>,
        limits: &Limits,
    ) -> Result<Confinement, gpuhost::Error> {
        let (arena, ctl) = match self.take() {
            Some(pair) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                pair
            }
            None => {
                let arena = self.host.arena(self.arena_bytes)?;
                let ctl = self.host.control_block()?;
                self.created.fetch_add(1, Ordering::Relaxed);
                (arena, ctl)
            }
        };
        Ok(Confinement::from_parts(
            arena,
            ctl,
            limits,
            Some(self.clone()),
        ))
    }

    /// The first pair nothing holds any more, reset; pairs still held go back in line.
    fn take(&self) -> Option<(Arc<gpuhost::Arena>, gpuhost::ControlBlock)> {
        let waiting = self.lock().len();
        for _ in 0..waiting {
            let (arena, mut ctl) = self.lock().pop_front()?;
            // The control block first: the watchdog lets go of it last.
            match ctl.reset_for_reuse() {
                Ok(true) => {}
                Ok(false) => {
                    self.lock().push_back((arena, ctl));
                    continue;
                }
                // Its context is gone (or the copy failed): freed, never handed out.
                Err(_) => continue,
            }
            match arena.reset_for_reuse() {
                Ok(true) => return Some((arena, ctl)),
                Ok(false) => self.lock().push_back((arena, ctl)),
                Err(_) => {}
            }
        }
        None
    }

    /// A guest is gone: its pair waits here until nothing holds it (or is freed when the pool
    /// is full or the arena grew large).
    pub(crate) fn give(&self, arena: Arc<gpuhost::Arena>, ctl: gpuhost::ControlBlock) {
        if arena.mapped() > MAX_KEPT_MAPPED {
            return;
        }
        let mut free = self.lock();
        if free.len() < self.kept {
            free.push_back((arena, ctl));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use gpuhost::sys;

    use super::*;

    /// Small quotas: an arena of one granule or so.
    fn limits() -> Limits {
        Limits {
            max_buffer_bytes: 1 << 20,
            max_globals_bytes: 1 << 16,
            ..Limits::default()
        }
    }

    /// `bytes` of device memory at `addr`, read as a kernel given the address could.
    fn peek(host: &gpuhost::Host, addr: u64, bytes: u64) -> Vec<u8> {
        host.enter().unwrap();
        let mut out = vec![0u8; bytes as usize];
        // SAFETY: `out` is writable for `bytes`; the range is mapped device memory of a live
        // arena or control block the test holds.
        let r = unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), addr, out.len()) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        out
    }

    /// Fills `bytes` at `addr` with `byte`, as a guest's kernel may write anywhere it can reach.
    fn poke(host: &gpuhost::Host, addr: u64, byte: u8, bytes: u64) {
        host.enter().unwrap();
        // SAFETY: the range is mapped device memory of a live arena or control block.
        let r = unsafe { sys::cuMemsetD8_v2(addr, byte, bytes as usize) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
        // SAFETY: a plain synchronize of the bound context.
        let r = unsafe { sys::cuCtxSynchronize() };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }

    /// A pair given back to `pool`, once nothing holds it (the watchdog lets go of a dropped
    /// guest's watch on its next tick), within 5 s.
    fn reusable(pool: &SandboxPool) -> (Arc<gpuhost::Arena>, gpuhost::ControlBlock) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(pair) = pool.take() {
                return pair;
            }
            assert!(Instant::now() < deadline, "the pair never became free");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_reused_arena_and_control_block_show_nothing_of_the_guest_before() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host.clone(), &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        let (base, mapped) = (first.arena.base(), first.arena.mapped());
        let ctl = first.watch.ctl().device_ptr();
        // The first guest's secrets: a buffer of its own, and every byte its kernels could
        // reach — the arena's whole mapped range, past its allocations too — and its control
        // block's words: the device window its kernels write, and the epoch the host stored
        // for it (kernels never write the host window).
        let buffer = first.arena.alloc(4096).unwrap();
        buffer.write(0, &[0xAB; 4096]).unwrap();
        poke(&host, base + 4096, 0x5A, mapped - 4096);
        let device_window = ctl + gpuhost::DEVICE_WINDOW as u64;
        poke(&host, device_window, 0x5A, gpuhost::CONTROL_BYTES as u64);
        first.watch.ctl().store_u32(0, 7);
        drop(buffer);
        drop(first);

        let (arena, block) = reusable(&pool);
        assert_eq!(
            arena.base(),
            base,
            "the pool handed out a new arena, not the reused one"
        );
        assert_eq!(block.device_ptr(), ctl);
        let seen = peek(&host, base, arena.mapped());
        let left = seen.iter().filter(|&&b| b != 0).count();
        assert_eq!(
            left, 0,
            "{left} bytes of the last guest's arena are readable"
        );
        for window in [ctl, device_window] {
            let words = peek(&host, window, gpuhost::CONTROL_BYTES as u64);
            assert!(
                words.iter().all(|&b| b == 0),
                "control block window {window:#x} not reset: {words:?}"
            );
        }
    }

    #[test]
    fn a_pair_still_held_by_the_last_guests_buffer_is_not_handed_out() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host, &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        let base = first.arena.base();
        // What a launch still running holds: a buffer of the arena.
        let held = first.arena.alloc(256).unwrap();
        drop(first);
        std::thread::sleep(Duration::from_millis(50));
        assert!(pool.take().is_none(), "a held arena was handed out");
        let second = pool.confinement(&limits).unwrap();
        assert_ne!(second.arena.base(), base);
        assert_eq!((pool.created(), pool.reused()), (2, 0));
        drop(held);
        drop(second);
        let (arena, _) = reusable(&pool);
        assert!(arena.used() == 0);
    }

    #[test]
    fn a_pool_serves_only_its_own_device_and_arena_size() {
        let host = gpuhost::host(0).unwrap();
        let pool = SandboxPool::new(host.clone(), &limits(), 4);
        assert!(pool.serves(&host, &limits()));
        let bigger = Limits {
            max_buffer_bytes: 2 << 20,
            ..limits()
        };
        assert!(!pool.serves(&host, &bigger));
    }
}
