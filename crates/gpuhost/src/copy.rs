//! Parallel memcpy between a caller's memory and staging chunks, for pageable transfers: one
//! core copies ~10 GB/s, a fifth of what a PCIe 5 DMA moves, so a chunk's copy is split into
//! pieces that a small process-wide pool of helper threads and the calling thread take in turn.
//!
//! The copy is synchronous for its caller: [`parallel`] returns only once every piece is copied,
//! so no helper ever touches the caller's memory after the borrow ends (an async transfer can be
//! dropped or even leaked between copies, never during one). Callers bound each call (see
//! transfer.rs: a step of a few hundred KiB per thread) so an executor thread is held only tens
//! of microseconds at a time. Pieces are claimed from a shared counter: a helper that wakes late
//! finds them all taken and touches nothing, so a slow wake-up never delays the caller.
//!
//! A copy may write with streaming (non-temporal) stores ([`Stores::Streaming`]): they skip the
//! read a cached store makes of every destination line before writing it, a third of the memory
//! traffic of a copy into memory nobody on the CPU reads next (a staging chunk the DMA engine
//! reads, or a destination too large for the caches).

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bytes one claim copies: small enough to balance threads that join late, large enough that
/// claiming (one atomic add) is noise next to the copy.
const PIECE: usize = 64 << 10;
/// Most helper threads the pool starts.
pub(crate) const MAX_HELPERS: usize = 64;
/// How long an idle helper keeps looking for work before it parks: longer than the gap between
/// two steps of a running transfer, so helpers stay awake through one.
const SPIN: Duration = Duration::from_micros(200);

/// How a copy writes its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stores {
    /// Ordinary stores (`memcpy`): the destination's lines are read into the cache first.
    Cached,
    /// Non-temporal stores where the target has them (x86-64), ordinary ones elsewhere.
    Streaming,
}

/// One copy: `len` bytes from `src` to `dst`, in pieces claimed through `next`.
struct Job {
    src: usize,
    dst: usize,
    len: usize,
    stores: Stores,
    /// Next piece to claim.
    next: AtomicUsize,
    /// Pieces copied.
    done: AtomicUsize,
    pieces: usize,
}

impl Job {
    /// Claims and copies pieces until none is left; returns how many this caller copied.
    fn work(&self) -> usize {
        let mut mine = 0;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.pieces {
                return mine;
            }
            let at = i * PIECE;
            let n = PIECE.min(self.len - at);
            // SAFETY: piece i lies inside both ranges (at + n <= len); the caller of `parallel`
            // keeps both alive and unaliased until every piece is done (it waits for `done`),
            // and each piece is claimed exactly once, so no two threads write the same bytes.
            unsafe {
                copy(
                    (self.src + at) as *const u8,
                    (self.dst + at) as *mut u8,
                    n,
                    self.stores,
                )
            };
            // Release: the caller's Acquire of `done` sees this piece's bytes (streaming stores
            // are fenced inside `copy` before it returns).
            self.done.fetch_add(1, Ordering::Release);
            mine += 1;
        }
    }
}

#[derive(Default)]
struct Inbox {
    jobs: VecDeque<Arc<Job>>,
    parked: usize,
}

/// The process's helper threads.
#[derive(Default)]
struct Pool {
    inbox: Mutex<Inbox>,
    cv: Condvar,
    /// Jobs posted ever: idle helpers watch it while spinning.
    posted: AtomicUsize,
    started: Mutex<usize>,
}

/// Copies `n` bytes from `src` to `dst` with `stores`.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `n` bytes, and the two must not
/// overlap.
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize, stores: Stores) {
    match stores {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract is stream_copy's.
        Stores::Streaming => unsafe { stream_copy(src, dst, n) },
        // SAFETY: the caller's contract is copy_nonoverlapping's.
        _ => unsafe { std::ptr::copy_nonoverlapping(src, dst, n) },
    }
}

/// Copies with SSE2 streaming stores (every x86-64 has SSE2): unaligned loads, 16-byte aligned
/// non-temporal stores of 64 bytes per round, ordinary copies for the unaligned head and the
/// tail, then a store fence, so the bytes are visible to any thread that later synchronizes with
/// this one (the caller's Release) and to a DMA enqueued after it.
///
/// # Safety
/// As [`copy`]'s.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = dst.align_offset(16).min(n);
    let body = (n - head) / 64 * 64;
    // SAFETY: `head <= n`: the first `head` bytes of both ranges, which do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut at = head;
    while at < head + body {
        // SAFETY: `at + 64 <= head + body <= n`: the 64 bytes lie inside both ranges; `dst + at`
        // is 16-byte aligned (`dst + head` is, and `at - head` is a multiple of 64), as
        // _mm_stream_si128 requires; the loads are unaligned ones.
        unsafe {
            let s = src.add(at).cast::<__m128i>();
            let d = dst.add(at).cast::<__m128i>();
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        at += 64;
    }
    // SAFETY: the last `n - at` bytes of both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), n - at) };
    // Streaming stores are weakly ordered: fence them before anything this thread does next.
    // SAFETY: SSE, which _mm_sfence needs, is part of every x86-64.
    unsafe { _mm_sfence() };
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

impl Pool {
    /// Starts helpers until `n` run (at most MAX_HELPERS); returns how many run.
    fn ensure(&'static self, n: usize) -> usize {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        while *started < n.min(MAX_HELPERS) {
            let spawned = std::thread::Builder::new()
                .name(format!("gpuhost-copy-{}", *started))
                .spawn(move || self.help());
            if let Err(e) = spawned {
                // Copies still complete: the calling thread takes every piece itself.
                tracing::warn!("cannot start a gpuhost copy thread: {e}");
                break;
            }
            *started += 1;
        }
        *started
    }

    fn help(&self) {
        loop {
            let job = self.next_job();
            job.work();
        }
    }

    /// The next posted job: spins for SPIN after the last one, then parks.
    fn next_job(&self) -> Arc<Job> {
        let since = Instant::now();
        let mut seen = self.posted.load(Ordering::Acquire);
        loop {
            let mut q = self.inbox.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(job) = q.jobs.pop_front() {
                return job;
            }
            if since.elapsed() >= SPIN {
                q.parked += 1;
                while q.jobs.is_empty() {
                    q = self.cv.wait(q).unwrap_or_else(|p| p.into_inner());
                }
                q.parked -= 1;
                if let Some(job) = q.jobs.pop_front() {
                    return job;
                }
                continue;
            }
            drop(q);
            while self.posted.load(Ordering::Acquire) == seen && since.elapsed() < SPIN {
                std::hint::spin_loop();
                std::thread::yield_now();
            }
            seen = self.posted.load(Ordering::Acquire);
        }
    }
}

/// Copies `src` into `dst` (equal lengths) with up to `helpers` helper threads beside the
/// calling thread; returns when every byte is copied.
#[cfg(test)]
pub(crate) fn parallel(dst: &mut [u8], src: &[u8], helpers: usize, stores: Stores) {
    // SAFETY: parallel_uninit writes only bytes copied from `src` through it.
    parallel_uninit(unsafe { as_uninit(dst) }, src, helpers, stores);
}

/// `bytes` seen as possibly uninitialised memory, to copy into with [`parallel_uninit`].
///
/// # Safety
/// Only initialised bytes may be written through the result (as the copies here do: they copy
/// from a `&[u8]`), so that `bytes` stays initialised.
pub(crate) unsafe fn as_uninit(bytes: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have one layout; the caller writes only
    // initialised bytes through the result.
    unsafe { &mut *(bytes as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// [`parallel`] into memory not yet initialised (a `Vec`'s spare capacity): every byte of
/// `dst[..src.len()]` is initialised when it returns.
pub(crate) fn parallel_uninit(
    dst: &mut [MaybeUninit<u8>],
    src: &[u8],
    helpers: usize,
    stores: Stores,
) {
    debug_assert_eq!(dst.len(), src.len());
    let len = dst.len().min(src.len());
    let pieces = len.div_ceil(PIECE);
    let helpers = helpers.min(pieces.saturating_sub(1));
    if helpers == 0 {
        // SAFETY: both ranges are `len` bytes of live borrows that cannot overlap (`&mut`).
        unsafe { copy(src.as_ptr(), dst.as_mut_ptr().cast(), len, stores) };
        return;
    }
    let p = pool();
    let helpers = helpers.min(p.ensure(helpers));
    let job = Arc::new(Job {
        src: src.as_ptr() as usize,
        dst: dst.as_mut_ptr() as usize,
        len,
        stores,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        pieces,
    });
    {
        let mut q = p.inbox.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..helpers {
            q.jobs.push_back(job.clone());
        }
        p.posted.fetch_add(1, Ordering::Release);
        for _ in 0..helpers.min(q.parked) {
            p.cv.notify_one();
        }
    }
    job.work();
    // Pieces other threads claimed are short (one PIECE each): wait for them without parking,
    // yielding once it takes long (a helper descheduled mid-piece on a busy machine).
    let mut spins = 0u32;
    while job.done.load(Ordering::Acquire) < pieces {
        spins += 1;
        if spins < 1_000 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    // Entries no helper took yet would only find nothing to do: drop them now.
    let mut q = p.inbox.lock().unwrap_or_else(|p| p.into_inner());
    q.jobs.retain(|j| !Arc::ptr_eq(j, &job));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_copies_every_byte_of_every_size_with_any_helper_count() {
        for len in [
            0,
            1,
            PIECE - 1,
            PIECE,
            PIECE + 1,
            5 * PIECE + 17,
            40 * PIECE,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            for helpers in [0, 1, 3, 8] {
                for stores in [Stores::Cached, Stores::Streaming] {
                    // Offsets 0 and 3 of the destination: aligned and unaligned heads.
                    for skew in [0, 3] {
                        let mut dst = vec![0u8; len + skew + 1];
                        parallel(&mut dst[skew..skew + len], &src, helpers, stores);
                        let at = format!("len {len}, helpers {helpers}, {stores:?}, skew {skew}");
                        assert!(dst[skew..skew + len] == src[..], "{at}");
                        assert!(dst[..skew].iter().all(|&b| b == 0), "wrote before: {at}");
                        assert_eq!(dst[skew + len], 0, "wrote past the end: {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn concurrent_callers_each_get_their_own_bytes() {
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..20u8 {
                        let src = vec![t.wrapping_mul(40).wrapping_add(round); 9 * PIECE + 3];
                        let mut dst = vec![0u8; src.len()];
                        parallel(&mut dst, &src, 3, Stores::Streaming);
                        assert!(dst == src);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
