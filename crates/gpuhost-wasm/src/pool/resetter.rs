//! The thread that resets (or frees) the pairs guests give back to [`SandboxPool`]s, so that no
//! guest's thread makes a driver call for them: one thread for the process, serving every pool.
//!
//! It makes a pass over the pools ([`SandboxPool::reset_free`]) when woken, every [`TICK`] while
//! a pool holds a pair its last guest may still hold, and for [`LINGER`] after the last such
//! pair: under steady load a give then finds it awake and wakes nobody, and the pairs given
//! back within one tick are reset in one pass (a futex wake per request otherwise: measured
//! with `scripts/probes/serve-cycles.sh`, waking it for each pair given back free doubled its
//! context switches per request). Idle, it sleeps until a give wakes it. The watchdog wakes it
//! once it has let go of the watches of guests dropped with work in flight
//! ([`watches_released`]), so such a pair is reset as soon as it is free rather than at the
//! next tick. Once nothing waits, it trims pools that have gone unused back to their size
//! ([`SandboxPool::trim`]).
//!
//! Its driver calls (a memset and an event record per pair, freeing an arena) may wait inside
//! libcuda behind another thread's call that waits for the device (watchdog/ says which); the
//! pairs are then ready later, and guests meanwhile get new ones: no guest waits for it.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::SandboxPool;

/// How often a pass runs while a pair waits for its last guest to let go, or while lingering.
const TICK: Duration = crate::watchdog::TICK;
/// How long the thread keeps ticking after the last pair it waited for was reset.
const LINGER: Duration = Duration::from_millis(50);
/// The longest idle sleep (a give or the watchdog wakes it before; this bounds a missed wake,
/// and how soon after [`super::TRIM_AFTER`] an unused pool is trimmed).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// The thread makes a pass.
const RUNNING: u8 = 0;
/// It waits for a tick (lingering, or a pair is held): a give need not wake it.
const TICKING: u8 = 1;
/// It sleeps until woken: a give wakes it.
const IDLE: u8 = 2;

/// The process's resetter, once a pool has started it.
static RESETTER: OnceLock<&'static Resetter> = OnceLock::new();

struct Resetter {
    pools: Mutex<Vec<Weak<SandboxPool>>>,
    wake: Condvar,
    state: AtomicU8,
    /// Pairs in every pool's `held` (given back, not yet taken out by a pass).
    held: AtomicUsize,
    /// The thread started.
    running: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section only reads or edits the pool list.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Resetter {
    fn get() -> &'static Resetter {
        RESETTER.get_or_init(|| {
            let r: &'static Resetter = Box::leak(Box::new(Resetter {
                pools: Mutex::new(Vec::new()),
                wake: Condvar::new(),
                state: AtomicU8::new(RUNNING),
                held: AtomicUsize::new(0),
                running: AtomicBool::new(false),
            }));
            // Without the thread no pair is reset: guests then get new pairs, as with no pool
            // (and given-back ones are freed with the pool), so this is only worth a warning.
            let spawned = std::thread::Builder::new()
                .name("gpuhost-sandbox-reset".into())
                .spawn(move || r.run());
            match spawned {
                Ok(_) => r.running.store(true, Ordering::SeqCst),
                Err(e) => tracing::warn!("cannot start the sandbox reset thread ({e}): pooled sandboxes will not be reused"),
            }
            r
        })
    }

    fn notify(&self) {
        let _g = lock(&self.pools);
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut last_held = Instant::now();
        loop {
            // Read before the pass as well as after: a pair given back free (its guest had
            // nothing in flight) is reset by the very pass that finds it, so `held` is 0 after
            // every pass under steady load, and read only then the thread never lingered, and
            // every give woke it (a futex wake in each `gpuhost serve` request's teardown).
            let found_held = self.held.load(Ordering::SeqCst) > 0;
            let pools: Vec<Arc<SandboxPool>> = {
                let mut g = lock(&self.pools);
                g.retain(|p| p.strong_count() > 0);
                g.iter().filter_map(Weak::upgrade).collect()
            };
            for pool in &pools {
                pool.reset_free();
            }
            let now = Instant::now();
            if found_held || self.held.load(Ordering::SeqCst) > 0 {
                last_held = now;
            }
            let lingering = now.duration_since(last_held) < LINGER;
            if !lingering {
                // Nothing waits: pools unused for a while go back to their size.
                for pool in &pools {
                    pool.trim();
                }
            }
            // Outside the lock: the last handle of a pool may be this one, and dropping it frees
            // its pairs.
            drop(pools);
            let g = lock(&self.pools);
            self.state
                .store(if lingering { TICKING } else { IDLE }, Ordering::SeqCst);
            // Read after the state is published: a give that this misses sees IDLE and wakes us
            // (both SeqCst, so one of the two sees the other).
            let wait = if lingering || self.held.load(Ordering::SeqCst) > 0 {
                TICK
            } else {
                IDLE_WAIT
            };
            let g = self
                .wake
                .wait_timeout(g, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            self.state.store(RUNNING, Ordering::SeqCst);
            drop(g);
        }
    }
}

/// Serves `pool` from now on (until it is dropped).
pub(super) fn serve(pool: &Arc<SandboxPool>) {
    lock(&Resetter::get().pools).push(Arc::downgrade(pool));
}

/// A pair was put in a pool's `held` (under its lock): counted, and the thread woken if it
/// sleeps.
pub(super) fn given() {
    let r = Resetter::get();
    r.held.fetch_add(1, Ordering::SeqCst);
    if r.state.load(Ordering::SeqCst) == IDLE {
        r.notify();
    }
}

/// Whether the thread runs, so that pairs given back come back reset (a guest may wait for one).
pub(super) fn running() -> bool {
    Resetter::get().running.load(Ordering::SeqCst)
}

/// `n` pairs left a pool's `held` (taken out by a pass, or dropped with the pool).
pub(super) fn taken(n: usize) {
    if n > 0 {
        Resetter::get().held.fetch_sub(n, Ordering::SeqCst);
    }
}

/// The watchdog let go of dropped guests' watches: their pairs may be free now. Wakes the
/// thread unless it is making a pass already (it then looks again within a tick). No driver
/// call and no pool lock: the watchdog's thread may call it.
pub(crate) fn watches_released() {
    // A process without pools never starts the thread for the watchdog.
    let Some(r) = RESETTER.get() else {
        return;
    };
    if r.state.load(Ordering::SeqCst) != RUNNING {
        r.notify();
    }
}
