//! The pool's guarantees on the device: what a reused pair shows of its last guest, when a
//! pair may be handed out again, and how many the pool keeps.

use std::future::Future;
use std::time::{Duration, Instant};

use gpuhost::sys;

use crate::confine::Confinement;

use super::*;

/// Small quotas: an arena of one granule or so.
fn limits() -> Limits {
    Limits {
        max_buffer_bytes: 1 << 20,
        max_globals_bytes: 1 << 16,
        ..Limits::default()
    }
}

/// Device 0's host, [`limits`], and a pool of size `kept` for them.
fn pool_of(kept: usize) -> (Arc<gpuhost::Host>, Limits, Arc<SandboxPool>) {
    let host = gpuhost::host(0).unwrap();
    let limits = limits();
    let pool = SandboxPool::new(host.clone(), &limits, kept);
    (host, limits, pool)
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
    let mut pair = None;
    within_5s(
        || {
            pair = pool.take();
            pair.is_some()
        },
        || "the pair never became free".into(),
    );
    pair.expect("taken")
}

#[test]
fn a_reused_arena_and_control_block_show_nothing_of_the_guest_before() {
    let (host, limits, pool) = pool_of(4);
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
    let (_, limits, pool) = pool_of(4);
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
    let (_, limits, pool) = pool_of(4);
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
    let (host, limits, pool) = pool_of(4);
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
    let (host, limits, pool) = pool_of(4);
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

/// Waits (5 s at most) until `done`; `what` says what did not happen.
fn within_5s(mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pool's pairs at rest within 5 s: none waiting for its guest or its reset.
fn wait_pending_none(pool: &SandboxPool) {
    within_5s(
        || pool.pending() == 0,
        || format!("{} pairs never reset or freed", pool.pending()),
    );
}

#[test]
fn a_pair_given_back_is_reset_by_the_resetter_without_any_later_give_or_take() {
    let (_, limits, pool) = pool_of(4);
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
    within_5s(
        || pool.kept() == n,
        || format!("the pool holds {} pairs, not {n}", pool.kept()),
    );
}

#[test]
fn pairs_past_the_pools_size_are_reset_for_reuse_under_load_and_freed_once_it_rests() {
    let (_, limits, pool) = pool_of(1);
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
    let (_, limits, pool) = pool_of(1);
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

/// Runs `f` to its end on a one-thread runtime (the pool's waits are woken by its resetter
/// thread and gpuhost's completion thread, not by the runtime).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// A pool of size 1 (so a bound of [`SURGE`] pairs), and [`SURGE`] guests' pairs made in it.
fn pool_at_its_bound() -> (Arc<SandboxPool>, Limits, Vec<Confinement>) {
    let (_, limits, pool) = pool_of(1);
    let guests = (0..SURGE)
        .map(|_| pool.confinement(&limits).unwrap())
        .collect();
    (pool, limits, guests)
}

/// [`pool_at_its_bound`], its guests gone, each pair still held by a buffer of the last
/// guest's that outlives it, as a launch still running would: no pass of the resetter brings
/// one back.
fn pool_at_its_bound_all_held() -> (Arc<SandboxPool>, Limits, Vec<gpuhost::DeviceBuffer>) {
    let (pool, limits, guests) = pool_at_its_bound();
    let held = guests
        .iter()
        .map(|g| g.arena.alloc(4096).unwrap())
        .collect();
    (pool, limits, held)
}

#[test]
fn a_guest_that_can_wait_gets_a_pair_on_its_way_back_rather_than_a_new_one_at_the_bound() {
    let (pool, limits, guests) = pool_at_its_bound();
    let bases: Vec<u64> = guests.iter().map(|g| g.arena.base()).collect();
    assert_eq!(pool.lent.load(Ordering::SeqCst), SURGE);
    // Given back: none of them reset yet when the next guest asks.
    drop(guests);
    let next = block_on(pool.confinement_waiting(&limits)).unwrap();
    assert_eq!(
        pool.created(),
        SURGE as u64,
        "a pair was made past the bound while the pool's own were on their way back"
    );
    assert_eq!(pool.reused() + pool.waited(), 1);
    assert!(
        bases.contains(&next.arena.base()),
        "the guest got an arena the pool never lent"
    );
    assert_eq!(
        nonzero(&pool.host, next.arena.base(), next.arena.mapped()),
        0
    );
    drop(next);
    wait_pending_none(&pool);
    assert_eq!(
        pool.lent.load(Ordering::SeqCst),
        0,
        "a loan is still counted"
    );
}

#[test]
fn a_guest_waits_no_longer_than_max_wait_for_pairs_their_last_guests_still_hold() {
    let (pool, limits, held) = pool_at_its_bound_all_held();
    let start = Instant::now();
    let next = block_on(pool.confinement_waiting(&limits)).unwrap();
    assert!(
        start.elapsed() >= MAX_WAIT,
        "the guest made a pair before its wait was up"
    );
    assert_eq!(pool.created(), SURGE as u64 + 1, "no pair was made");
    drop((next, held));
}

#[test]
fn past_its_wait_a_guest_at_the_bound_makes_no_pair_while_the_resetter_is_only_behind() {
    let (pool, _, guests) = pool_at_its_bound();
    // Given back free: the resetter resets them on its next pass (or is resetting them now).
    drop(guests);
    // As a guest whose wait is up sees the pool (its own loan counted). A pair made now would
    // be one past the bound, freed again by the resetter: the collapse this guards against.
    let _loan = lend::Lent::new(&pool);
    match pool.next(false) {
        lend::Next::Make => {
            panic!("a pair was made past the bound while the pool's own were being reset")
        }
        lend::Next::Ready(reset, ctl) | lend::Next::Queued(reset, ctl) => drop((reset, ctl)),
        lend::Next::Wait => {}
    }
    assert_eq!(pool.created(), SURGE as u64);
}

#[test]
fn a_wait_dropped_unfinished_leaves_no_loan_counted() {
    let (pool, limits, held) = pool_at_its_bound_all_held();
    let mut waiting = Box::pin(pool.confinement_waiting(&limits));
    let waker = std::task::Waker::noop();
    let polled = waiting
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker));
    assert!(polled.is_pending(), "the guest did not wait");
    assert_eq!(pool.lent.load(Ordering::SeqCst), 1);
    drop(waiting);
    assert_eq!(
        pool.lent.load(Ordering::SeqCst),
        0,
        "the dropped wait is still counted"
    );
    assert_eq!(pool.created(), SURGE as u64);
    drop(held);
}
