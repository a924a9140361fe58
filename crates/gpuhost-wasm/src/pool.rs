//! Reuse of sandboxed guests' device memory: an embedder that runs many short guests with the
//! same limits (`gpuhost serve`, a Store per request) hands their contexts one [`SandboxPool`],
//! and each guest's arena and control block go back to it when its Store is dropped, instead of
//! being unmapped and freed (and the next guest's mapped, zeroed, registered and created anew).
//!
//! Isolation is what a new pair gives: a pair is reset only when nothing of the last guest holds
//! it (no buffer, no launch, no watch: their handles are counted), and handed out again only
//! once every byte a kernel could reach is zero — the control block's windows (CPU stores,
//! `ControlBlock::reset_for_reuse`) and the arena's whole mapped range, whose memset must have
//! completed on the device (`Arena::queue_zeroing`, `Zeroing::fence_all`, then `ArenaReset::ready`).
//!
//! A guest's thread (a `gpuhost serve` request's) makes no driver call here and takes only the
//! pool's own short lock: a give puts the pair in `held`, a take hands out the oldest pair whose
//! fence the completion thread has seen pass (an atomic load), and when none has, the guest
//! waits for one or gets a new pair (lend.rs). Everything else is the resetter thread's
//! (resetter.rs): once nothing holds a pair any more (a guest with nothing in flight holds
//! nothing by its give; the watchdog drops the watch of one stopped with work in flight once
//! that work ended, and wakes the resetter; a launch drops its anchors when it ends) it queues
//! the pair's reset — the memset on the pool's own stream, where no guest launches, so a reset
//! never queues behind a guest's long kernel, and one fence after all of a pass's memsets (one
//! event for the completion thread per pass, not per pair: at 60k requests a second, per pair
//! was 60k event records and their queries, each serialized in the driver with the requests'
//! calls) — and moves it to `resetting`; or frees it, when the pool was full or
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

mod lend;
mod resetter;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuhost::{Arena, ArenaReset, ControlBlock, Zeroing};

use crate::confine::arena_bytes;
use crate::limits::Limits;

pub(crate) use lend::Lent;
pub use lend::MAX_WAIT;
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

impl Given {
    /// Nothing of its last guest holds it (stable once true: the pool holds the only handles).
    fn is_free(&self) -> bool {
        !self.arena.is_held() && !self.ctl.is_held()
    }
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
    /// Pairs lent to guests and not given back yet ([`Lent`]).
    lent: AtomicUsize,
    /// Woken at the end of each of the resetter's passes over the pool: guests waiting for a
    /// pair on its way back look again.
    back: tokio::sync::Notify,
    reused: AtomicU64,
    waited: AtomicU64,
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
            lent: AtomicUsize::new(0),
            back: tokio::sync::Notify::new(),
            reused: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            created: AtomicU64::new(0),
            born: std::time::Instant::now(),
            last_use_ms: AtomicU64::new(0),
        });
        resetter::serve(&pool);
        pool
    }

    /// Guests that got a reset pair from the pool at once.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Guests that got a reset pair from the pool after waiting for its zeroing, or for the
    /// resetter to bring it back.
    pub fn waited(&self) -> u64 {
        self.waited.load(Ordering::Relaxed)
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

    /// The resetter's pass: queues the reset of every held pair that nothing holds any more, or
    /// frees it (not to be kept).
    fn reset_free(&self) {
        self.reset_free_pass();
        // Whether or not it found any: a guest waiting for a pair looks again (and counts its
        // wait), so none waits longer than the pass after its limit.
        self.back.notify_waiters();
    }

    fn reset_free_pass(&self) {
        let free: VecDeque<_> = {
            let mut st = self.lock();
            if st.held.is_empty() {
                return;
            }
            // Stable once true: the pool holds the only handles, so none can appear.
            let (free, held): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut st.held)
                .into_iter()
                .partition(Given::is_free);
            st.held = held;
            st.moving += free.len();
            free
        };
        resetter::taken(free.len());
        // Each pair leaves `moving` under the lock that puts it in `resetting`, or once freed.
        let mut stream = None;
        let mut zeroing = Vec::with_capacity(free.len());
        for Given {
            arena,
            mut ctl,
            keep,
        } in free
        {
            let zeroed = if keep {
                self.zero(arena, &mut ctl, &mut stream)
            } else {
                drop(arena);
                None
            };
            match zeroed {
                Some(z) => zeroing.push((z, ctl)),
                None => {
                    // Freed here, before it stops counting.
                    drop(ctl);
                    self.lock().moving -= 1;
                }
            }
        }
        if zeroing.is_empty() {
            return;
        }
        let n = zeroing.len();
        let (zs, ctls): (Vec<Zeroing>, Vec<ControlBlock>) = zeroing.into_iter().unzip();
        // One fence for the pass's zeroings: one event for the completion thread, not one per
        // pair. (The stream is there: each zeroing was queued on it.)
        let resets = match stream.as_ref().and_then(|s| s.as_ref().ok()) {
            Some(stream) => Zeroing::fence_all(zs, stream).ok(),
            None => None,
        };
        match resets {
            Some(resets) => {
                let mut st = self.lock();
                st.resetting.extend(resets.into_iter().zip(ctls));
                st.moving -= n;
            }
            None => {
                // The context is gone: freed, never handed out.
                drop(ctls);
                self.lock().moving -= n;
            }
        }
    }

    /// Clears `ctl` and queues the zeroing of `arena` on the pool's stream (looked up once per
    /// pass, in `stream`); None when the pair is to be freed instead (the memset failed, or the
    /// context or the stream is gone). The arena is freed then; `ctl` by the caller.
    fn zero(
        &self,
        arena: Arc<Arena>,
        ctl: &mut ControlBlock,
        stream: &mut Option<Result<Arc<gpuhost::Stream>, gpuhost::Error>>,
    ) -> Option<Zeroing> {
        // A block whose context is gone (Err) is freed with its arena.
        if !matches!(ctl.reset_for_reuse(), Ok(true)) {
            return None;
        }
        // No stream (a lost context being replaced): freed, as a failed reset's.
        let stream = stream.get_or_insert_with(|| self.stream()).as_ref().ok()?;
        match arena.queue_zeroing(stream) {
            Ok(Ok(z)) => Some(z),
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
mod tests;
