//! Reuse of sandboxed guests' device memory: an embedder that runs many short guests with the
//! same limits (`gpuhost serve`, a Store per request) hands their contexts one [`SandboxPool`],
//! and each guest's arena and control block go back to it when its Store is dropped, instead of
//! being unmapped and freed (and the next guest's mapped, zeroed, registered and created anew).
//!
//! Isolation is what a new pair gives: a pair is reset only when nothing of the last guest holds
//! it (no buffer, no launch, no watch: their handles are counted), and handed out again only
//! once every byte a kernel could reach is zero — the control block's windows (CPU stores,
//! `ControlBlock::reset_for_reuse`) and the arena's whole mapped range, whose memset must have
//! completed on the device (`Arena::queue_reset`, then `ArenaReset::ready`).
//!
//! A guest's thread (a `gpuhost serve` request's) makes no driver call here and takes only the
//! pool's own short lock: a give puts the pair in `held`, a take hands out the oldest pair whose
//! fence the completion thread has seen pass (an atomic load), and when none has, the guest gets
//! a new pair. Everything else is the resetter thread's (resetter.rs): once nothing holds a
//! pair any more (a guest with nothing in flight holds nothing by its give; the watchdog drops
//! the watch of one stopped with work in flight once that work ended, and wakes the resetter; a
//! launch drops its anchors when it ends) it queues the pair's reset — the memset
//! and a fence on the pool's own stream, where no guest launches, so a reset never queues behind
//! a guest's long kernel — and moves it to `resetting`; or frees it, when the pool was full or
//! the arena grew large, so that unmapping an arena is no request's work either. (Resets queued
//! by the next give or take, on the request's thread, one stream and one lock for all of them,
//! cost a `gpuhost serve` request's teardown 98–114 µs at 16 and 64 connections on the H200,
//! bench/h200-runs/2026-12-02-s12/04d46f5-final/.)
//! A reset that fails, or a pair whose context is gone meanwhile, is freed, never handed out.
//!
//! Under load the pool may hold up to [`SURGE`] times its size: a pair takes a few milliseconds
//! from its give to being ready again (the watchdog's tick, the reset, the fence), so at tens of
//! thousands of requests a second hundreds of pairs are on their way back at any time. Freeing
//! the ones past the size instead made requests miss and create pairs while the resetter freed
//! others (each an unmap and a free, 150–250 µs on the H200): at 64 connections the resetter fell
//! behind by thousands of pairs and serve fell to 0.03× of native
//! (bench/h200-runs/2026-12-02-s14/). The pool goes back to its size once it has been unused
//! for [`TRIM_AFTER`].

mod resetter;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuhost::{Arena, ArenaReset, ControlBlock};

use crate::confine::{Confinement, arena_bytes};
use crate::limits::Limits;

pub(crate) use resetter::watches_released;

/// Arenas a guest grew past this many mapped bytes are freed, not kept: the pool holds no more
/// memory than small guests need, and resetting one costs a memset of at most this.
pub const MAX_KEPT_MAPPED: u64 = 8 << 20;
/// How many times its size a pool may hold while in use; pairs past that are freed.
pub const SURGE: usize = 4;
/// How long a pool goes unused (no give, no take) before the resetter frees its ready pairs past
/// its size.
const TRIM_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// A pair given back, waiting until nothing of its last guest holds it.
struct Given {
    arena: Arc<Arena>,
    ctl: ControlBlock,
    /// Reset and kept once free; false: freed then (the pool was full, or the arena grew large).
    keep: bool,
}

/// The pairs a pool holds; each holds one live device buffer (its control block's).
#[derive(Default)]
struct Kept {
    /// Given back, and maybe still held by the last guest's launches or watch; not reset yet.
    held: VecDeque<Given>,
    /// Control block cleared and the arena's zeroing queued, oldest first.
    resetting: VecDeque<(ArenaReset, ControlBlock)>,
    /// Taken out of `held` by the resetter and not yet in `resetting` or freed: counted, so that
    /// what the pool says it holds never misses a pair that still holds its buffer.
    moving: usize,
}

/// A pool of sandbox arenas and control blocks for guests with the same limits on one device.
pub struct SandboxPool {
    host: Arc<gpuhost::Host>,
    arena_bytes: u64,
    kept: usize,
    state: Mutex<Kept>,
    /// The stream resets are queued on (a new one once the context generation changes); only
    /// the resetter thread (and tests) use it.
    stream: Mutex<Option<Arc<gpuhost::Stream>>>,
    reused: AtomicU64,
    created: AtomicU64,
    /// When the pool was made, and its last give or take, in ms after that.
    born: std::time::Instant,
    last_use_ms: AtomicU64,
}

impl SandboxPool {
    /// A pool for sandboxed guests on `host` under `limits`, keeping `kept` pairs at rest and
    /// up to [`SURGE`] times that while in use (returned ones past that are freed).
    pub fn new(host: Arc<gpuhost::Host>, limits: &Limits, kept: usize) -> Arc<Self> {
        let pool = Arc::new(Self {
            host,
            arena_bytes: arena_bytes(limits),
            kept,
            state: Mutex::new(Kept::default()),
            stream: Mutex::new(None),
            reused: AtomicU64::new(0),
            created: AtomicU64::new(0),
            born: std::time::Instant::now(),
            last_use_ms: AtomicU64::new(0),
        });
        resetter::serve(&pool);
        pool
    }

    /// Guests that got a reset pair from the pool.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Guests that got a new pair (none was reset and ready).
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// Pairs the pool holds now (waiting for the last guest's launches and watch to let go,
    /// being reset or freed, or ready); each holds its control block's buffer and its arena's
    /// mapped memory.
    pub fn kept(&self) -> usize {
        let st = self.lock();
        st.held.len() + st.moving + st.resetting.len()
    }

    /// Pairs the pool holds that are not ready yet: waiting for the last guest to let go, or
    /// being reset or freed. 0 once every pair given back is ready (nothing runs meanwhile):
    /// what the pool holds then stays as it is until the next give or take.
    pub fn pending(&self) -> usize {
        let st = self.lock();
        let resetting = st.resetting.iter().filter(|(r, _)| !r.is_done()).count();
        st.held.len() + st.moving + resetting
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // Each critical section moves pairs between the lists and makes no driver call.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a guest on `host` under `limits` may use this pool (the arena size matches).
    pub fn serves(&self, host: &Arc<gpuhost::Host>, limits: &Limits) -> bool {
        Arc::ptr_eq(&self.host, host) && self.arena_bytes == arena_bytes(limits)
    }

    /// A guest's confinement: a reset pair, else a new one.
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
        Confinement::from_parts(arena, ctl, limits, Some(self.clone()))
    }

    /// The oldest pair whose zeroing has completed, without waiting and without a driver call;
    /// failed ones are freed (they hold no device work any more).
    fn take(&self) -> Option<(Arc<Arena>, ControlBlock)> {
        self.used_now();
        loop {
            let (reset, ctl) = {
                let mut st = self.lock();
                let i = st.resetting.iter().position(|(r, _)| r.is_done())?;
                st.resetting.remove(i)?
            };
            match reset.ready() {
                Ok(Ok(arena)) => return Some((arena, ctl)),
                // The zeroing failed or the context is gone: freed, never handed out.
                Ok(Err(_)) => {}
                // Never: it was done (kept, in case).
                Err(reset) => {
                    self.lock().resetting.push_front((reset, ctl));
                    return None;
                }
            }
        }
    }

    /// The resetter's pass: queues the reset of every held pair that nothing holds any more, or
    /// frees it (not to be kept).
    fn reset_free(&self) {
        let free: VecDeque<_> = {
            let mut st = self.lock();
            if st.held.is_empty() {
                return;
            }
            // Stable once true: the pool holds the only handles, so none can appear.
            let (free, held): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut st.held)
                .into_iter()
                .partition(|g| !g.arena.is_held() && !g.ctl.is_held());
            st.held = held;
            st.moving += free.len();
            free
        };
        resetter::taken(free.len());
        // Each pair leaves `moving` under the lock that puts it in `resetting`, or once freed.
        let mut stream = None;
        for Given {
            arena,
            mut ctl,
            keep,
        } in free
        {
            let reset = if keep {
                self.reset(arena, &mut ctl, &mut stream)
            } else {
                drop(arena);
                None
            };
            match reset {
                Some(reset) => {
                    let mut st = self.lock();
                    st.resetting.push_back((reset, ctl));
                    st.moving -= 1;
                }
                None => {
                    // Freed here, before it stops counting.
                    drop(ctl);
                    self.lock().moving -= 1;
                }
            }
        }
    }

    /// Clears `ctl` and queues the zeroing of `arena` on the pool's stream (looked up once per
    /// pass, in `stream`); None when the pair is to be freed instead (the memset failed, or the
    /// context or the stream is gone). The arena is freed then; `ctl` by the caller.
    fn reset(
        &self,
        arena: Arc<Arena>,
        ctl: &mut ControlBlock,
        stream: &mut Option<Result<Arc<gpuhost::Stream>, gpuhost::Error>>,
    ) -> Option<ArenaReset> {
        // A block whose context is gone (Err) is freed with its arena.
        if !matches!(ctl.reset_for_reuse(), Ok(true)) {
            return None;
        }
        // No stream (a lost context being replaced): freed, as a failed reset's.
        let stream = stream.get_or_insert_with(|| self.stream()).as_ref().ok()?;
        match arena.queue_reset(stream) {
            Ok(Ok(reset)) => Some(reset),
            // Never: nothing holds it (freed, in case: it is out of `held` already, and a pair
            // somebody holds is not the pool's to keep).
            Ok(Err(_)) => None,
            // The memset failed or the context is gone: freed, never handed out.
            Err(_) => None,
        }
    }

    /// The pool's reset stream, of the host's context generation now.
    fn stream(&self) -> Result<Arc<gpuhost::Stream>, gpuhost::Error> {
        let mut s = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stream) = s.as_ref()
            && stream.generation() == self.host.generation()
        {
            return Ok(stream.clone());
        }
        let stream = Arc::new(self.host.stream()?);
        *s = Some(stream.clone());
        Ok(stream)
    }

    /// A guest is gone: its pair waits here until nothing holds it, then the resetter thread
    /// resets it (or frees it, when the pool is full or the arena grew large). No driver call.
    pub(crate) fn give(&self, arena: Arc<Arena>, ctl: ControlBlock) {
        self.used_now();
        {
            let mut st = self.lock();
            // Pairs on their way out count too: the pool never holds more than its surge bound.
            let keep = arena.mapped() <= MAX_KEPT_MAPPED
                && st.held.len() + st.moving + st.resetting.len() < self.kept * SURGE;
            st.held.push_back(Given { arena, ctl, keep });
            // Counted under the lock, so a pass that takes it out counts it out after.
            resetter::given();
        }
    }
}

impl SandboxPool {
    fn used_now(&self) {
        let ms = self.born.elapsed().as_millis() as u64;
        self.last_use_ms.store(ms, Ordering::Relaxed);
    }

    /// The resetter's idle step: once the pool has gone unused for [`TRIM_AFTER`], frees the
    /// newest ready pairs past its size.
    fn trim(&self) {
        let now_ms = self.born.elapsed().as_millis() as u64;
        let idle_ms = now_ms.saturating_sub(self.last_use_ms.load(Ordering::Relaxed));
        if idle_ms < TRIM_AFTER.as_millis() as u64 {
            return;
        }
        let extra: Vec<_> = {
            let mut st = self.lock();
            let mut extra = Vec::new();
            while st.held.len() + st.moving + st.resetting.len() > self.kept {
                match st.resetting.back() {
                    Some((reset, _)) if reset.is_done() => {}
                    _ => break,
                }
                if let Some(pair) = st.resetting.pop_back() {
                    extra.push(pair);
                }
            }
            // Counted until freed, as a pass's frees are.
            st.moving += extra.len();
            extra
        };
        for (reset, ctl) in extra {
            // Done: its arena comes back (or was freed already) without waiting.
            drop(reset.ready());
            drop(ctl);
            self.lock().moving -= 1;
        }
    }
}

impl Drop for SandboxPool {
    fn drop(&mut self) {
        // Its held pairs are freed with it: the resetter no longer waits for them.
        resetter::taken(self.lock().held.len());
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

    /// How many of the `bytes` at `addr` are not zero, as a kernel given the address reads them.
    fn nonzero(host: &gpuhost::Host, addr: u64, bytes: u64) -> usize {
        peek(host, addr, bytes).iter().filter(|&&b| b != 0).count()
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
    /// guest's watch on its next tick) and the resetter has reset it, within 5 s.
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
        let left = nonzero(&host, base, arena.mapped());
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
    fn an_idle_guests_pair_is_free_for_its_reset_as_soon_as_it_is_given_back() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host, &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        drop(first);
        // No tick of the watchdog and no pass of the resetter needed: nothing in flight, so
        // neither its watch nor the confinement's own handles hold the pair by now.
        let st = pool.lock();
        let free = st
            .held
            .iter()
            .filter(|g| !g.arena.is_held() && !g.ctl.is_held())
            .count();
        let waiting = st.held.len() + st.moving + st.resetting.len();
        assert_eq!(waiting, 1, "the pair was not given back");
        assert!(
            st.held.is_empty() || free == st.held.len(),
            "a given-back pair is still held by its guest's watch or confinement"
        );
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

    /// Launches testkit's `wait_word` on `stream`: it runs until word 0 of `flag` is set, then
    /// writes (a nonzero count) into `out`.
    fn launch_gate(
        stream: &gpuhost::Stream,
        flag: &gpuhost::ControlBlock,
        out: &gpuhost::DeviceBuffer,
    ) -> gpuhost::Completion {
        let source = gpuhost::ModuleSource::new(
            testkit::WAIT_WORD_ENTRY,
            gpuhost::ModuleImage::Ptx(testkit::WAIT_WORD_PTX.into()),
        );
        let registry =
            gpuhost::Registry::from_sources(stream.host(), "pool-test", vec![source]).unwrap();
        let one = gpuhost::LaunchConfig {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_mem_bytes: 0,
        };
        let args = [
            gpuhost::Arg::Buffer(&flag.anchor(), 0),
            gpuhost::Arg::Buffer(out, 0),
        ];
        stream
            .launch(
                &registry.kernel(testkit::WAIT_WORD_ENTRY).unwrap(),
                one,
                &args,
            )
            .unwrap()
    }

    #[test]
    fn a_pair_is_handed_out_only_once_its_zeroing_has_completed() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host.clone(), &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        let (base, mapped) = (first.arena.base(), first.arena.mapped());
        poke(&host, base, 0x5A, mapped);
        // The pool's reset stream is busy with a kernel that waits for the test's word: a
        // zeroing queued behind it cannot run before the word is set.
        let flag = host.control_block().unwrap();
        let out = host.alloc(4).unwrap();
        let busy = launch_gate(&pool.stream().unwrap(), &flag, &out);
        drop(first);
        // Once the watchdog lets go of the guest's watch, the resetter queues the pair's reset...
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.lock().resetting.is_empty() {
            assert!(
                pool.take().is_none(),
                "a pair was handed out before its zeroing ran"
            );
            assert!(
                Instant::now() < deadline,
                "the pair's reset was never queued"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // ...and no take hands it out while that zeroing waits behind the kernel.
        for _ in 0..20 {
            assert!(
                pool.take().is_none(),
                "a pair was handed out before its zeroing ran"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!busy.is_done(), "the kernel holding the reset stream ended");
        flag.store_u32(0, 1);
        let (arena, _) = reusable(&pool);
        assert_eq!(arena.base(), base, "not the reused arena");
        let left = nonzero(&host, base, arena.mapped());
        assert_eq!(
            left, 0,
            "{left} bytes of the last guest's arena are readable"
        );
        busy.wait().unwrap();
    }

    #[test]
    fn a_pair_whose_launch_is_still_running_is_not_reset_until_it_ends() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host.clone(), &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        let base = first.arena.base();
        // The last guest's launch, still running when its Store goes: it holds the arena
        // (through its buffer) and writes into it when it ends.
        let out = first.arena.alloc(4).unwrap();
        let flag = host.control_block().unwrap();
        let stream = host.stream().unwrap();
        let running = launch_gate(&stream, &flag, &out);
        drop(out);
        drop(first);
        // Long past the watchdog's letting go of the watch: only the launch holds the pair.
        for _ in 0..40 {
            assert!(
                pool.take().is_none(),
                "a pair was handed out while a launch still ran on it"
            );
            assert!(
                pool.lock().resetting.is_empty(),
                "a pair was reset while a launch still ran on it"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!running.is_done(), "the launch ended by itself");
        flag.store_u32(0, 1);
        running.wait().unwrap();
        let (arena, _) = reusable(&pool);
        assert_eq!(arena.base(), base, "not the reused arena");
        // The launch's write at its end came before the reset, which zeroed it.
        let left = nonzero(&host, base, arena.mapped());
        assert_eq!(left, 0, "{left} bytes the launch wrote survived the reset");
    }

    /// The pool's pairs at rest within 5 s: none waiting for its guest or its reset.
    fn wait_pending_none(pool: &SandboxPool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.pending() != 0 {
            assert!(
                Instant::now() < deadline,
                "{} pairs never reset or freed",
                pool.pending()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_pair_given_back_is_reset_by_the_resetter_without_any_later_give_or_take() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host, &limits, 4);
        let first = pool.confinement(&limits).unwrap();
        let base = first.arena.base();
        drop(first);
        assert_eq!(pool.kept(), 1, "the pair given back is not counted");
        // No give or take on this thread from here on: the guest's thread queues no reset.
        wait_pending_none(&pool);
        assert_eq!(pool.kept(), 1);
        let ready = pool.lock().resetting.iter().all(|(r, _)| r.is_done());
        assert!(ready, "the pair is not reset");
        let (arena, _) = pool.take().expect("the reset pair is handed out");
        assert_eq!(arena.base(), base, "not the reused arena");
    }

    /// Waits (5 s at most) until `pool` holds `n` pairs.
    fn wait_kept(pool: &SandboxPool, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.kept() != n {
            assert!(
                Instant::now() < deadline,
                "the pool holds {} pairs, not {n}",
                pool.kept()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn pairs_past_the_pools_size_are_reset_for_reuse_under_load_and_freed_once_it_rests() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host, &limits, 1);
        let guests: Vec<_> = (0..3).map(|_| pool.confinement(&limits).unwrap()).collect();
        let arenas: Vec<_> = guests.iter().map(|g| Arc::downgrade(&g.arena)).collect();
        drop(guests);
        // Within the surge bound: all three are reset, none freed, while the pool is in use.
        wait_pending_none(&pool);
        assert_eq!(
            pool.kept(),
            3,
            "pairs past the pool's size were freed under load"
        );
        // Unused for TRIM_AFTER: back to its size.
        wait_kept(&pool, 1);
        let live: Vec<_> = arenas.iter().filter_map(|a| a.upgrade()).collect();
        assert_eq!(live.len(), 1, "trimmed pairs live on");
        let (arena, _) = pool.take().expect("the kept pair is handed out");
        assert!(Arc::ptr_eq(&arena, &live[0]));
    }

    #[test]
    fn a_pair_past_the_surge_bound_is_freed_by_the_resetter_once_its_guest_lets_go() {
        let host = gpuhost::host(0).unwrap();
        let limits = limits();
        let pool = SandboxPool::new(host, &limits, 1);
        let guests: Vec<_> = (0..=SURGE)
            .map(|_| pool.confinement(&limits).unwrap())
            .collect();
        let last = Arc::downgrade(&guests[SURGE].arena);
        // Past the bound: counted while it waits (it still holds its control block's buffer),
        // then freed.
        drop(guests);
        assert!(pool.kept() >= SURGE);
        wait_pending_none(&pool);
        assert!(last.upgrade().is_none(), "the pair past the bound lives on");
        assert!(pool.kept() <= SURGE, "the pool holds {} pairs", pool.kept());
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
