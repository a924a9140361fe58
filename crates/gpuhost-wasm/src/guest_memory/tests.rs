//! Tests of guest memories (the parent module): locking on the second large write, uploads
//! straight from the memory landing exactly, the limits, reuse that shows nothing of the old
//! guest, and growth in place.

use super::tally::lock as lock_tally;
use super::*;

const MIB: usize = 1 << 20;

thread_local! {
    /// The step [`injected`] fails next on this thread.
    static FAIL: std::cell::Cell<Option<Step>> = const { std::cell::Cell::new(None) };
}

/// Makes the next `step` on this thread fail, as the kernel may.
fn fail_next(step: Step) {
    FAIL.set(Some(step));
}

/// The seam the parent module calls at `step`: fails once after [`fail_next`].
pub(super) fn injected(step: Step) -> std::io::Result<()> {
    if FAIL.get() == Some(step) {
        FAIL.set(None);
        return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
    }
    Ok(())
}

/// Whether `slot`'s memory is gone within 5 s: a lookup on another thread (another test's) may
/// hold it an instant longer.
fn gone(slot: &Weak<Slot>) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while slot.strong_count() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    slot.strong_count() == 0
}

/// A memory of `minimum` bytes that may grow to 256 MiB, reserved for that.
pub(super) fn creator_memory(c: &GuestMemoryCreator, minimum: usize) -> Box<dyn LinearMemory> {
    let ty = MemoryType::new(0, Some(4096));
    c.new_memory(ty, minimum, Some(256 * MIB), Some(256 * MIB), 64 << 10)
        .unwrap()
}

/// The memory's first `len` bytes, to fill and check in place: guest memory is shared
/// mutable memory by nature (wasmtime hands out `&mut` views of it the same way).
#[allow(clippy::mut_from_ref)]
fn bytes(m: &dyn LinearMemory, len: usize) -> &mut [u8] {
    assert!(len <= m.byte_size());
    // SAFETY: `len` accessible bytes of a memory no guest and no DMA uses in these tests
    // while the slice lives.
    unsafe { std::slice::from_raw_parts_mut(m.as_ptr(), len) }
}

/// Uploads `src` (inside a memory) through `direct_parts`, if it goes direct, into a fresh device
/// buffer, and returns what the device holds; as a guest of its own, with `max_locked`, whose
/// tally counts only that memory.
fn upload_direct(host: &Arc<Host>, src: &[u8], max_locked: u64) -> Option<Vec<u8>> {
    upload_direct_as(host, src, &mut LockedTally::default(), max_locked)
}

/// [`upload_direct`] as the guest whose tally is `guest`.
fn upload_direct_as(
    host: &Arc<Host>,
    src: &[u8],
    guest: &mut LockedTally,
    max_locked: u64,
) -> Option<Vec<u8>> {
    let parts = direct_parts(host, src, guest, max_locked)?;
    let s = host.stream().unwrap();
    let buf = host.alloc(src.len()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        s.upload_locked(&buf, 0, &parts).await.unwrap();
        Some(s.download_to_vec(&buf, 0, src.len()).await.unwrap())
    })
}

/// A memory of two granules whose first 2 MiB were written once, staged: the next large write
/// into its first granule locks it.
fn written_once(host: &Arc<Host>, c: &GuestMemoryCreator) -> Box<dyn LinearMemory> {
    let m = creator_memory(c, 2 * GRANULE);
    assert!(upload_direct(host, &bytes(&*m, 2 * MIB)[..], 1 << 30).is_none());
    m
}

/// A memory of two granules whose first granule a guest's writes locked.
fn locked_once(host: &Arc<Host>, c: &GuestMemoryCreator) -> Box<dyn LinearMemory> {
    let m = written_once(host, c);
    let src = &bytes(&*m, 2 * MIB)[..];
    assert!(upload_direct(host, src, 1 << 30).is_some(), "locked");
    m
}

/// Ends the guest of `m` (a memory of two granules, its first locked) and makes the next
/// guest's memory: `m`, pooled.
fn pooled_again(c: &GuestMemoryCreator, m: Box<dyn LinearMemory>) -> Box<dyn LinearMemory> {
    let base = m.as_ptr();
    drop(m);
    let m = creator_memory(c, 2 * GRANULE);
    assert_eq!(
        m.as_ptr(),
        base,
        "the pooled memory, its first granule locked"
    );
    m
}

#[test]
fn gaps_are_the_parts_of_a_span_no_piece_covers() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = creator_memory(&c, 64 * MIB);
    let slot = slot_of(m.as_ptr() as usize).unwrap();
    let piece = |at: Range<usize>| Piece {
        locked: lock(&host, &slot, at.clone()).unwrap(),
        at,
    };
    let pieces = vec![piece(4096..8192), piece(16384..20480)];
    assert_eq!(gaps(&pieces, 0..4096), vec![0..4096]);
    assert_eq!(
        gaps(&pieces, 0..32768),
        vec![0..4096, 8192..16384, 20480..32768]
    );
    assert_eq!(gaps(&pieces, 4096..8192), Vec::<Range<usize>>::new());
    assert_eq!(gaps(&pieces, 6000..18000), vec![8192..16384]);
}

#[test]
fn a_memory_is_locked_on_a_second_large_write_into_its_granules_and_uploads_exactly() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = creator_memory(&c, 48 * MIB);
    let mem = bytes(&*m, 48 * MIB);
    for (i, b) in mem.iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    // Across a granule boundary, at odd offsets.
    let src = &mem[GRANULE - 12345..GRANULE + 3 * MIB + 7];
    assert!(upload_direct(&host, src, 1 << 30).is_none(), "first write");
    assert!(
        upload_direct(&host, &src[..MIB - 1], 1 << 30).is_none(),
        "small"
    );
    assert_eq!(upload_direct(&host, src, 1 << 30).as_deref(), Some(src));
    let slot = slot_of(m.as_ptr() as usize).unwrap();
    assert_eq!(slot.locks().bytes, 2 * GRANULE, "its two granules");
    assert_eq!(
        slot.locks().pieces.len(),
        1,
        "locked together: one DMA per write"
    );
    // Within the locked granules, a first write goes direct too, reading the bytes now.
    mem[GRANULE..GRANULE + 2 * MIB].fill(9);
    let src = &mem[GRANULE - MIB..GRANULE + 2 * MIB];
    assert_eq!(upload_direct(&host, src, 1 << 30).as_deref(), Some(src));
    // A granule beyond the guest's limit is staged.
    let far = &mem[2 * GRANULE..2 * GRANULE + 2 * MIB];
    assert!(upload_direct(&host, far, 2 * GRANULE as u64).is_none());
    assert!(upload_direct(&host, far, 2 * GRANULE as u64).is_none());
    assert_eq!(slot.locks().bytes, 2 * GRANULE);
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), 2 * GRANULE);
}

#[test]
fn a_memory_the_driver_refuses_to_lock_has_its_writes_staged_and_its_budget_returned() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = creator_memory(&c, 2 * GRANULE);
    let slot = slot_of(m.as_ptr() as usize).unwrap();
    // Registered behind the creator's back: the driver refuses an overlapping registration.
    let squatter = lock(&host, &slot, 4 * MIB..5 * MIB).unwrap();
    let src = &bytes(&*m, 2 * MIB)[..];
    assert!(upload_direct(&host, src, 1 << 30).is_none());
    assert!(upload_direct(&host, src, 1 << 30).is_none(), "refused");
    assert!(slot.locks().refused);
    assert_eq!(
        c.pool.locked.load(Ordering::Relaxed),
        0,
        "nothing stays charged"
    );
    drop(squatter);
    assert!(
        upload_direct(&host, src, 1 << 30).is_none(),
        "refused while its guest runs"
    );
}

#[test]
fn past_the_creators_budget_writes_are_staged_and_locked_memories_live_as_long_as_it() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::with_lock_budget(GRANULE);
    let a = creator_memory(&c, 2 * GRANULE);
    let mem = bytes(&*a, 2 * GRANULE);
    let (first, second) = mem.split_at(GRANULE);
    for _ in 0..2 {
        upload_direct(&host, &first[..2 * MIB], 1 << 30);
    }
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), GRANULE);
    // Another granule of the same memory, and another memory: over the budget.
    let b = creator_memory(&c, 2 * GRANULE);
    for src in [&second[..2 * MIB], &bytes(&*b, 2 * MIB)[..]] {
        assert!(upload_direct(&host, src, 1 << 30).is_none());
        assert!(
            upload_direct(&host, src, 1 << 30).is_none(),
            "over the budget"
        );
    }
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), GRANULE);
    // The locked memory outlives its guest, pooled; it goes with its creator (its pieces
    // unregistered on the release thread).
    // Its slot, by a weak handle: after it goes, another test's memory may be mapped there.
    let slot = Arc::downgrade(&slot_of(a.as_ptr() as usize).unwrap());
    drop((a, b));
    assert!(slot.upgrade().is_some(), "pooled");
    drop(c);
    assert!(gone(&slot), "dropped with its creator");
    host.wait_unloads();
}

#[test]
fn a_pooled_memory_comes_back_zeroed_and_its_locked_pages_carry_the_new_bytes() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let len = 40 * MIB;
    let m = creator_memory(&c, len);
    let mem = bytes(&*m, len);
    mem.fill(0xA5);
    let src = &mem[3 * MIB..3 * MIB + 20 * MIB];
    upload_direct(&host, src, 1 << 30);
    assert!(upload_direct(&host, src, 1 << 30).is_some());
    let base = m.as_ptr();
    drop(m);
    // Smaller at first, then grown over all the old guest's bytes.
    let mut m = creator_memory(&c, MIB);
    assert_eq!(m.as_ptr(), base, "the pooled memory");
    assert_eq!(m.byte_size(), MIB);
    m.grow_to(len).unwrap();
    let mem = bytes(&*m, len);
    assert!(
        mem.iter().all(|&b| b == 0),
        "the old guest's bytes are gone"
    );
    mem.fill(0x3C);
    let src = &mem[3 * MIB..3 * MIB + 20 * MIB];
    assert!(
        upload_direct(&host, src, 1 << 30).is_none(),
        "a new guest's first write"
    );
    let got = upload_direct(&host, src, 1 << 30).unwrap();
    assert!(
        got.iter().all(|&b| b == 0x3C),
        "the device got the new bytes"
    );
}

#[test]
fn writes_of_every_length_and_place_in_a_growing_memory_upload_exactly_what_it_holds() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let mut m = creator_memory(&c, 8 * MIB);
    // A fixed xorshift, so a failure repeats.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let (mut direct, mut staged) = (0, 0);
    for round in 0..40 {
        // The memory grows now and then, to an edge that is no granule's.
        if round % 10 == 9 {
            let to = (m.byte_size() + (1 + next(24)) * MIB + 65536).min(120 * MIB);
            m.grow_to(to).unwrap();
        }
        let size = m.byte_size();
        let len = (MIB + next(16 * MIB)).min(size);
        let at = next(size - len + 1);
        let mem = bytes(&*m, size);
        // Every 8 bytes tell their place: a part landing shifted or cut short shows.
        for (i, w) in mem[at..at + len].chunks_mut(8).enumerate() {
            let word = (i as u64) << 8 | round;
            w.copy_from_slice(&word.to_le_bytes()[..w.len()]);
        }
        match upload_direct(&host, &mem[at..at + len], 1 << 30) {
            Some(got) => {
                direct += 1;
                assert!(
                    got == mem[at..at + len],
                    "round {round}: {len} bytes at {at}"
                );
            }
            None => staged += 1,
        }
    }
    // Most places were written before (the first write into a granule is staged).
    assert!(direct > staged, "{direct} direct, {staged} staged");
    let slot = slot_of(m.as_ptr() as usize).unwrap();
    let locks = slot.locks();
    assert!(
        locks
            .pieces
            .windows(2)
            .all(|w| w[0].at.end <= w[1].at.start)
    );
    assert_eq!(
        locks.bytes,
        locks.pieces.iter().map(|p| p.at.len()).sum::<usize>()
    );
}

#[test]
fn a_memory_grows_in_place_up_to_its_reservation_and_no_further() {
    let c = GuestMemoryCreator::default();
    let mut m = creator_memory(&c, 64 << 10);
    let base = m.as_ptr();
    m.grow_to(4 * MIB).unwrap();
    assert_eq!((m.as_ptr(), m.byte_size()), (base, 4 * MIB));
    bytes(&*m, 4 * MIB)[4 * MIB - 1] = 1;
    let e = m.grow_to(256 * MIB + 65536).unwrap_err();
    assert!(e.to_string().contains("reservation"), "{e}");
    assert_eq!(m.byte_size(), 4 * MIB);
}

/// Red team: a memory reused from the pool keeps the last guest's locked pieces, and its
/// pieces are the new guest's locked memory: a guest whose limit they exceed (0: every write
/// staged) has its writes staged, not uploaded from pieces another guest's limit paid for.
#[test]
fn a_pooled_memorys_pieces_count_against_the_next_guests_locked_memory_limit() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = written_once(&host, &c);
    let src = &bytes(&*m, 2 * MIB)[..];
    assert!(upload_direct(&host, src, 1 << 30).is_some(), "locked");
    let m = pooled_again(&c, m);
    let src = &bytes(&*m, 2 * MIB)[..];
    for limit in [0, GRANULE as u64 - 1] {
        for write in ["first", "second"] {
            assert!(
                upload_direct(&host, src, limit).is_none(),
                "limit {limit}, {write} write: staged"
            );
        }
    }
    assert!(
        upload_direct(&host, src, GRANULE as u64).is_some(),
        "within the limit: direct"
    );
}

/// Red team: looking up the memory of an address that lies in none (a guest memory wasmtime
/// made itself, under an engine without the creator) while another thread drops the memory
/// just below it: the lookup may hold that memory's last handle, and must not drop it while
/// it holds the table a dropped memory takes itself out of (a thread relocking it waits
/// forever, and every later memory with it).
#[test]
fn looking_up_an_address_outside_every_memory_never_deadlocks_with_a_memory_dropped_meanwhile() {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;
    let c = GuestMemoryCreator::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Just past the newest memory's reservation: in its guard, no guest's byte.
    let past = Arc::new(AtomicUsize::new(0));
    let looker = {
        let (stop, past) = (stop.clone(), past.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let addr = past.load(Ordering::Relaxed);
                if addr != 0 {
                    // None, or another test's memory mapped there since.
                    slot_of(addr);
                }
            }
        })
    };
    const ROUNDS: usize = 100_000;
    let (done, finished) = std::sync::mpsc::channel();
    let rounds = Arc::new(AtomicUsize::new(0));
    let dropper = {
        let (past, rounds) = (past.clone(), rounds.clone());
        std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                let m = creator_memory(&c, 64 << 10);
                past.store(m.as_ptr() as usize + m.byte_capacity(), Ordering::Relaxed);
                drop(m);
                rounds.fetch_add(1, Ordering::Relaxed);
            }
            done.send(()).unwrap();
        })
    };
    let r = finished.recv_timeout(Duration::from_secs(60));
    stop.store(true, Ordering::Relaxed);
    assert!(
        r.is_ok(),
        "stuck after {} of {ROUNDS} memories made and dropped beside lookups: deadlocked",
        rounds.load(Ordering::Relaxed)
    );
    dropper.join().unwrap();
    looker.join().unwrap();
}

/// Red team: a memory whose guest ended while a write's DMA still reads one of its pieces (the
/// write's future dropped midway: the batch fencing the DMA holds the piece, as the parts held
/// here do) is not handed to the next guest, whose reset would zero the bytes the DMA reads and
/// whose own writes would land in them, until the DMA lets go of it.
#[test]
fn a_pooled_memory_a_dma_still_reads_is_not_reused_until_the_dma_lets_go() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = written_once(&host, &c);
    let src = &bytes(&*m, 2 * MIB)[..];
    let in_flight =
        direct_parts(&host, src, &mut LockedTally::default(), 1 << 30).expect("locked: direct");
    let base = m.as_ptr();
    drop(m);
    let next = creator_memory(&c, 2 * GRANULE);
    assert_ne!(next.as_ptr(), base, "handed out while a DMA reads it");
    drop(in_flight);
    let after = creator_memory(&c, 2 * GRANULE);
    assert_eq!(after.as_ptr(), base, "reused once the DMA let go");
}

/// Red team: with custom page sizes (an embedder's engine may enable them) a memory's size is
/// any number of bytes, no multiple of the system page: the memory still grows in place, and a
/// locked one is still pooled and reused at any size, zeroed.
#[test]
fn a_memory_of_one_byte_pages_grows_and_is_reused_at_sizes_no_system_page_divides() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let ty = MemoryType::builder()
        .page_size_log2(0)
        .min(100)
        .build()
        .unwrap();
    let mut m = c
        .new_memory(ty.clone(), 100, None, Some(256 * MIB), 0)
        .unwrap();
    m.grow_to(5000).unwrap();
    bytes(&*m, 5000)[4999] = 7;
    let size = GRANULE + 12345;
    m.grow_to(size).unwrap();
    let mem = bytes(&*m, size);
    mem.fill(0xA5);
    let src = &mem[..2 * MIB];
    upload_direct(&host, src, 1 << 30);
    assert_eq!(
        upload_direct(&host, src, 1 << 30).as_deref(),
        Some(src),
        "direct"
    );
    let base = m.as_ptr();
    drop(m);
    let mut m = c.new_memory(ty, 100, None, Some(256 * MIB), 0).unwrap();
    assert_eq!(m.as_ptr(), base, "the pooled memory");
    assert_eq!(m.byte_size(), 100);
    m.grow_to(size).unwrap();
    assert!(bytes(&*m, size).iter().all(|&b| b == 0), "zeroed");
}

/// Red team: an embedder's engine may reserve nothing ahead for memories
/// (`Config::memory_reservation(0)`: wasmtime's own memories then move as they grow). Ours never
/// move, so they still reserve what the memory may grow to (its maximum, or 4 GiB).
#[test]
fn a_memory_wasmtime_reserves_nothing_for_still_grows_in_place_to_its_maximum() {
    let c = GuestMemoryCreator::default();
    for (maximum, to) in [(Some(8 * MIB), 8 * MIB), (None, 100 * MIB)] {
        let ty = MemoryType::new(1, maximum.map(|m| (m >> 16) as u32));
        let mut m = c.new_memory(ty, 64 << 10, maximum, Some(0), 0).unwrap();
        let base = m.as_ptr();
        m.grow_to(to).unwrap();
        assert_eq!((m.as_ptr(), m.byte_size()), (base, to));
        bytes(&*m, to)[to - 1] = 1;
    }
}

/// Red team: a component may hold many memories (a core module each), and the limit is the
/// guest's across them: each memory alone fits it, and a memory written again and again counts
/// once. Before the limit was per memory: this guest would have locked four granules, not two.
#[test]
fn a_guests_locked_memory_is_counted_across_its_memories_each_memory_once() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let limit = 2 * GRANULE as u64;
    let mut guest = LockedTally::default();
    let (a, b) = (written_once(&host, &c), written_once(&host, &c));
    let (a, b) = (bytes(&*a, 2 * GRANULE), bytes(&*b, 2 * GRANULE));
    for _ in 0..3 {
        let src = &a[..2 * MIB];
        assert_eq!(
            upload_direct_as(&host, src, &mut guest, limit).as_deref(),
            Some(src)
        );
    }
    assert_eq!(guest.bytes(), GRANULE, "one granule, however often written");
    let src = &b[..2 * MIB];
    assert_eq!(
        upload_direct_as(&host, src, &mut guest, limit).as_deref(),
        Some(src),
        "the second memory's granule: within the limit"
    );
    assert_eq!(guest.bytes(), 2 * GRANULE);
    // Each memory's second granule: under the limit for that memory alone, over it for the guest.
    for m in [&a, &b] {
        let src = &m[GRANULE..GRANULE + 2 * MIB];
        for write in ["first", "second"] {
            assert!(
                upload_direct_as(&host, src, &mut guest, limit).is_none(),
                "{write} write: staged"
            );
        }
    }
    assert_eq!(guest.bytes(), 2 * GRANULE);
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), 2 * GRANULE);
    // What the guest locked still serves its writes.
    let src = &a[MIB..3 * MIB];
    assert_eq!(
        upload_direct_as(&host, src, &mut guest, limit).as_deref(),
        Some(src)
    );
}

/// Red team: a memory reused from the pool comes with the last guest's pieces, and they count
/// for the next guest beside its other memories' (nothing of the last guest's tally comes with
/// it: that went with its Store). Over the limit together, the memory written second is staged,
/// uncounted.
#[test]
fn a_pooled_memorys_pieces_count_beside_the_next_guests_other_memories() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = written_once(&host, &c);
    let mut last = LockedTally::default();
    let src = &bytes(&*m, 2 * MIB)[..];
    assert!(upload_direct_as(&host, src, &mut last, 1 << 30).is_some());
    let base = m.as_ptr();
    drop((m, last));
    let limit = 2 * GRANULE as u64 - 1;
    let mut guest = LockedTally::default();
    let reused = creator_memory(&c, 2 * GRANULE);
    assert_eq!(
        reused.as_ptr(),
        base,
        "the pooled memory, its first granule locked"
    );
    let fresh = written_once(&host, &c);
    let src = &bytes(&*fresh, 2 * MIB)[..];
    assert!(upload_direct_as(&host, src, &mut guest, limit).is_some());
    assert_eq!(
        guest.bytes(),
        GRANULE,
        "the pooled memory is not counted before its write"
    );
    let src = &bytes(&*reused, 2 * MIB)[..];
    for write in ["first", "second"] {
        assert!(
            upload_direct_as(&host, src, &mut guest, limit).is_none(),
            "{write} write from the pooled memory: staged"
        );
    }
    assert_eq!(guest.bytes(), GRANULE, "the staged memory is not counted");
}

/// Red team: a memory made while a guest is instantiated (`Runtime::run` polls that in a
/// `made_for` scope) counts for the guest from the start, and the pool hands it no memory whose
/// pieces would take it past its limit: a component of many memories would otherwise take as
/// many locked memories as the pool holds, pinning them where only it can use them.
#[test]
fn memories_made_for_a_guest_take_no_pooled_pieces_past_its_limit_and_count_from_the_start() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let (a, b) = (written_once(&host, &c), written_once(&host, &c));
    for m in [&a, &b] {
        assert!(upload_direct(&host, &bytes(&**m, 2 * MIB)[..], 1 << 30).is_some());
    }
    let pooled = [a.as_ptr(), b.as_ptr()];
    drop((a, b));
    let guest = SharedTally::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let made = rt.block_on(made_for(guest.clone(), GRANULE as u64, 0, async {
        [
            creator_memory(&c, 2 * GRANULE),
            creator_memory(&c, 2 * GRANULE),
        ]
    }));
    let [reused, fresh] = made;
    assert!(pooled.contains(&reused.as_ptr()), "the first: a pooled one");
    assert!(!pooled.contains(&fresh.as_ptr()), "the second: fresh");
    assert_eq!(
        lock_tally(&guest).bytes(),
        GRANULE,
        "counted from the start"
    );
    // The pooled memory's pieces serve the guest's writes; the fresh memory can lock nothing.
    for (m, direct) in [(&reused, true), (&fresh, false)] {
        let src = &bytes(&**m, 2 * MIB)[..];
        assert!(upload_direct_as(&host, src, &mut lock_tally(&guest), GRANULE as u64).is_none());
        let second = upload_direct_as(&host, src, &mut lock_tally(&guest), GRANULE as u64);
        assert_eq!(second.is_some(), direct);
    }
    assert_eq!(lock_tally(&guest).bytes(), GRANULE);
    // Outside the scope a memory is made for no guest: the other pooled one, counted for none.
    let other = creator_memory(&c, 2 * GRANULE);
    assert!(pooled.contains(&other.as_ptr()));
    assert_eq!(lock_tally(&guest).bytes(), GRANULE);
}

/// Red team: a refusal (the driver refusing a lock, or a write straight from a piece) is its
/// guest's: a memory pooled after one comes with the pieces it locked before, and the next
/// guest's writes from them go direct, not staged while the pieces stay pinned for nothing.
#[test]
fn a_refusal_goes_with_its_guest_and_the_next_guest_writes_from_the_pooled_pieces() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = written_once(&host, &c);
    let mem = bytes(&*m, 2 * GRANULE);
    assert!(
        upload_direct(&host, &mem[..2 * MIB], 1 << 30).is_some(),
        "locked"
    );
    let slot = slot_of(m.as_ptr() as usize).unwrap();
    // Registered behind the creator's back: the driver refuses an overlapping registration.
    let squatter = lock(&host, &slot, GRANULE + 4 * MIB..GRANULE + 5 * MIB).unwrap();
    let src = &mem[GRANULE..GRANULE + 2 * MIB];
    assert!(upload_direct(&host, src, 1 << 30).is_none());
    assert!(upload_direct(&host, src, 1 << 30).is_none(), "refused");
    assert!(slot.locks().refused);
    drop(squatter);
    drop(slot);
    let m = pooled_again(&c, m);
    let src = &bytes(&*m, 2 * MIB)[..];
    assert!(
        upload_direct(&host, src, 1 << 30).is_none(),
        "a new guest's first write"
    );
    assert!(
        upload_direct(&host, src, 1 << 30).as_deref() == Some(src),
        "the pooled pieces serve the new guest"
    );
}

/// Red team: one creator may make memories for guests of several devices (a guest loaded by one
/// device's Runtime and run by another's shares the engine, and its creator), and a memory's
/// pieces are locked with one device's context, usable by that device's writes alone. A pooled
/// memory locked for device 0 goes to no guest of device 1 (its pieces would stay pinned and
/// count against that guest's limit, serving none of its writes): it stays pooled for device
/// 0's next guest.
#[test]
fn a_pooled_memory_goes_only_to_a_guest_of_the_device_its_pieces_are_locked_for() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = locked_once(&host, &c);
    let base = m.as_ptr();
    drop(m);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let made_for_device = |device| {
        let guest = SharedTally::default();
        let m = rt.block_on(made_for(guest.clone(), 1 << 30, device, async {
            creator_memory(&c, 2 * GRANULE)
        }));
        (m, lock_tally(&guest).bytes())
    };
    let (other, counted) = made_for_device(1);
    assert_ne!(other.as_ptr(), base, "a guest of device 1: a fresh memory");
    assert_eq!(counted, 0, "nothing pinned counts against it");
    let (own, counted) = made_for_device(0);
    assert_eq!(
        own.as_ptr(),
        base,
        "device 0's next guest: the pooled memory"
    );
    assert_eq!(counted, GRANULE);
}

/// Red team: a memory whose unlocked pages cannot be dropped when its guest ends (`madvise`
/// failing) is handed to no other guest (the old guest's bytes would show), and is kept, not
/// leaked: its pieces stay locked and counted against the budget while its creator lives
/// (unregistering them then may deadlock: the module header) and go with the creator.
#[test]
fn a_memory_whose_pages_cannot_be_dropped_is_never_reused_and_goes_with_its_creator() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = locked_once(&host, &c);
    let slot = Arc::downgrade(&slot_of(m.as_ptr() as usize).unwrap());
    let base = m.as_ptr();
    fail_next(Step::Retire);
    drop(m);
    let next = creator_memory(&c, 2 * GRANULE);
    assert_ne!(next.as_ptr(), base, "never handed out again");
    assert!(
        slot.upgrade().is_some_and(|s| s.locks().bytes == GRANULE),
        "kept, its piece locked"
    );
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), GRANULE);
    drop((next, c));
    assert!(gone(&slot), "gone with its creator");
    host.wait_unloads();
}

/// Red team: a pooled memory that cannot be reset for the next guest (`mprotect` failing, as
/// with ENOMEM once `vm.max_map_count` is reached) was dropped, unregistering its pieces while
/// its creator lives, which may deadlock with a guest's kernel (the module header). It is kept
/// apart instead, never handed out again, and goes with its creator; the guest gets a fresh
/// memory.
#[test]
fn a_pooled_memory_that_cannot_be_reset_is_kept_apart_and_goes_with_its_creator() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = locked_once(&host, &c);
    let slot = Arc::downgrade(&slot_of(m.as_ptr() as usize).unwrap());
    let base = m.as_ptr();
    drop(m);
    fail_next(Step::Reset);
    let next = creator_memory(&c, 2 * GRANULE);
    assert_ne!(next.as_ptr(), base, "a fresh memory");
    assert!(
        slot.upgrade().is_some_and(|s| s.locks().bytes == GRANULE),
        "kept, its piece locked"
    );
    let after = creator_memory(&c, 2 * GRANULE);
    assert_ne!(after.as_ptr(), base, "never handed out again");
    assert_eq!(c.pool.locked.load(Ordering::Relaxed), GRANULE);
    drop((next, after, c));
    assert!(gone(&slot), "gone with its creator");
    host.wait_unloads();
}

/// Red team: every `buffer.write` took its guest's tally lock, even one too small ever to go
/// direct (under [`DIRECT_MIN`]): such a write is staged without waiting for the tally.
#[test]
fn a_write_too_small_to_go_direct_never_waits_for_its_guests_tally() {
    let host = gpuhost::host(0).unwrap();
    let c = GuestMemoryCreator::default();
    let m = creator_memory(&c, 2 * MIB);
    let src = &bytes(&*m, DIRECT_MIN - 1)[..];
    let guest = SharedTally::default();
    let held = lock_tally(&guest);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let (host, guest) = (&host, &guest);
        s.spawn(move || done.send(direct_parts_for(host, src, guest, 1 << 30).is_none()));
        let r = finished.recv_timeout(std::time::Duration::from_secs(5));
        drop(held);
        assert_eq!(r, Ok(true), "staged, without waiting for the tally");
    });
}
