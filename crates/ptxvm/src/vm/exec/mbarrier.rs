//! `mbarrier`'s executor. The PTX ISA leaves the 8-byte object's layout to the implementation;
//! ptxvm's: the arrivals still pending in the current phase (bits 0–19), the arrivals each
//! phase expects (bits 20–39), a mark that the word holds a barrier (bit 62, set by `init`) and
//! the current phase's parity (bit 63). An arrival that brings the pending count to zero
//! completes the phase: the parity flips and the count starts again. The state an arrival
//! returns is the object as it was, so a wait by state compares parities. Each lane's operation
//! is one atomic read-modify-write, in lane order.
//!
//! What faults follows NVIDIA's hardware (the H100, session 37, scripts/probes/mbarrier-probe.cu:
//! one operation on one shared word per process), so that softcuda fails where a GPU would:
//! - an arrival or wait on a word without the mark, or with any other bit set
//!   ([`FaultKind::NotABarrier`]): NVIDIA ends the launch with `CUDA_ERROR_LAUNCH_FAILED` for an
//!   arrival on every pattern of garbage tried (zero, all ones, 5, 0x0707…), and for a wait on
//!   some of them, and the context is lost;
//! - an arrival of more than the phase's pending count ([`FaultKind::BarrierOverArrival`]):
//!   NVIDIA loses the context there too (an `arrive` of 3 on a barrier expecting 1 or 2);
//! - `inval` changes nothing: on NVIDIA an invalidated barrier takes arrivals as before (the ISA
//!   calls any use after `inval` undefined; the word is ordinary memory again, to overwrite).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use super::super::access::{LaneFault, lanes};
use super::super::mem::{Loc, Mem};
use super::super::warp::Warp;
use super::BlockMem;
use crate::api::FaultKind;
use crate::ir::{Mbarrier, MbarrierKind};

/// Bits of each count.
const COUNT: u32 = 20;
const MASK: u64 = (1 << COUNT) - 1;
/// The mark of a word that holds a barrier.
const BARRIER: u64 = 1 << 62;
const PARITY: u32 = 63;

/// Whether `word` is a barrier in ptxvm's layout: the mark set, and no bit outside the layout.
fn holds_barrier(word: u64) -> bool {
    let layout = MASK | (MASK << COUNT) | BARRIER | (1 << PARITY);
    word & BARRIER != 0 && word & !layout == 0
}

/// Why an `mbarrier` operation faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Misuse {
    /// The word holds no barrier.
    NotABarrier,
    /// The arrival counts more than the phase still waits for.
    OverArrival,
}

/// The object after `kind` with operand `a` on `old`, and the lane's result (the prior state,
/// or whether the wait is over).
fn update(kind: MbarrierKind, old: u64, a: u64) -> Result<(u64, u64), Misuse> {
    let (pending, expected, parity) = (old & MASK, (old >> COUNT) & MASK, old >> PARITY);
    let pack = |pending: u64, expected: u64, parity: u64| {
        pending | (expected << COUNT) | BARRIER | (parity << PARITY)
    };
    let done = match kind {
        MbarrierKind::Init => (pack(a & MASK, a & MASK, 0), 0),
        MbarrierKind::Inval => (old, 0),
        _ if !holds_barrier(old) => return Err(Misuse::NotABarrier),
        MbarrierKind::Arrive { .. } if a > pending => return Err(Misuse::OverArrival),
        MbarrierKind::Arrive { drop, complete } => {
            let expected = if drop {
                expected.saturating_sub(a)
            } else {
                expected
            };
            let left = pending - a;
            let new = if left == 0 && complete {
                pack(expected, expected, parity ^ 1)
            } else {
                pack(left, expected, parity)
            };
            (new, old)
        }
        MbarrierKind::Wait { parity: by_parity } => {
            let waited = if by_parity { a & 1 } else { a >> PARITY };
            (old, u64::from(waited != parity))
        }
    };
    Ok(done)
}

impl Warp {
    /// `mbarrier` for the lanes in `mask`.
    pub(super) fn mbarrier(
        &mut self,
        mem: &mut Mem<'_>,
        bm: &BlockMem,
        op: &Mbarrier,
        mask: u32,
    ) -> Result<(), LaneFault> {
        let a = self.rd(op.a);
        let mut out = [0u64; 32];
        for l in lanes(mask) {
            let loc = self
                .lane_loc(mem, bm, op.space, &op.addr, l, 8, true)
                .map_err(|e| (e, l))?;
            let Loc::Ptr(p) = loc else { continue };
            // SAFETY: `lane_loc` returned 8 valid, writable bytes aligned to 8, unaliased by
            // Rust references (shared memory is the VM's own buffer; global memory the
            // `Memory` contract's); every access to them goes through atomics.
            let word = unsafe { AtomicU64::from_ptr(p.cast()) };
            // The last attempt's outcome: an error stops the update and leaves the word as it was.
            let mut outcome = Ok((0, 0));
            let _ = word.fetch_update(SeqCst, SeqCst, |old| {
                outcome = update(op.kind, old, a[l]);
                outcome.ok().map(|(new, _)| new)
            });
            out[l] = match outcome {
                Ok((_, r)) => r,
                Err(why) => {
                    let addr = self.addr_of(&op.addr, l);
                    let kind = match why {
                        Misuse::NotABarrier => FaultKind::NotABarrier { addr },
                        Misuse::OverArrival => FaultKind::BarrierOverArrival { addr },
                    };
                    return Err((kind, l));
                }
            };
        }
        if matches!(op.kind, MbarrierKind::Wait { .. })
            && mask != 0
            && lanes(mask).all(|l| out[l] == 0)
        {
            self.stalled = true;
        }
        self.wr(op.d, &out, mask);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARRIVE: MbarrierKind = MbarrierKind::Arrive {
        drop: false,
        complete: true,
    };

    /// `update` on a word known to hold a barrier.
    fn up(kind: MbarrierKind, old: u64, a: u64) -> (u64, u64) {
        update(kind, old, a).expect("a barrier, and arrivals it waits for")
    }

    #[test]
    fn a_phase_completes_on_its_last_arrival_and_waits_by_state_or_parity_see_it() {
        let (mut b, _) = up(MbarrierKind::Init, 0, 3);
        let mut states = Vec::new();
        for _ in 0..3 {
            let (n, s) = up(ARRIVE, b, 1);
            states.push(s);
            b = n;
        }
        let wait = |b, s| up(MbarrierKind::Wait { parity: false }, b, s).1;
        let parity = |b, p| up(MbarrierKind::Wait { parity: true }, b, p).1;
        // Phase 0 is over: every state taken in it sees that; parity 0 is complete, 1 is not.
        assert!(states.iter().all(|&s| wait(b, s) == 1));
        assert_eq!((parity(b, 0), parity(b, 1)), (1, 0));
        // One arrival into phase 1: its state waits still.
        let (b2, s) = up(ARRIVE, b, 1);
        assert_eq!(wait(b2, s), 0);
        // arrive_drop: phase 1 ends on two arrivals, and phase 2 expects two.
        let drop = MbarrierKind::Arrive {
            drop: true,
            complete: true,
        };
        let (b3, _) = up(drop, b2, 1);
        let (b4, _) = up(ARRIVE, b3, 1);
        assert_eq!((parity(b4, 1), b4 & MASK, (b4 >> COUNT) & MASK), (1, 2, 2));
        // noComplete never ends a phase.
        let no = MbarrierKind::Arrive {
            drop: false,
            complete: false,
        };
        let (b5, _) = up(no, b4, 2);
        assert_eq!(parity(b5, 0), 0);
    }

    #[test]
    fn arrivals_and_waits_on_words_that_hold_no_barrier_fault_and_init_makes_one() {
        let wait = MbarrierKind::Wait { parity: true };
        for word in [0, u64::MAX, 5, 0x0707_0707_0707_0707, 1 << 63] {
            assert_eq!(
                update(ARRIVE, word, 1),
                Err(Misuse::NotABarrier),
                "{word:#x}"
            );
            assert_eq!(update(wait, word, 0), Err(Misuse::NotABarrier), "{word:#x}");
            // Any word can be made a barrier; inval leaves it as it is.
            assert!(holds_barrier(up(MbarrierKind::Init, word, 4).0));
            assert_eq!(up(MbarrierKind::Inval, word, 0).0, word);
        }
        // A barrier with a stray bit outside the layout is garbage too.
        let b = up(MbarrierKind::Init, 0, 2).0;
        assert!(update(ARRIVE, b, 1).is_ok());
        assert_eq!(update(ARRIVE, b | 1 << 45, 1), Err(Misuse::NotABarrier));
    }

    #[test]
    fn an_arrival_past_the_pending_count_faults_and_an_invalidated_barrier_still_counts() {
        let b = up(MbarrierKind::Init, 0, 2).0;
        assert_eq!(update(ARRIVE, b, 3), Err(Misuse::OverArrival));
        let one_left = up(ARRIVE, b, 1).0;
        assert_eq!(update(ARRIVE, one_left, 2), Err(Misuse::OverArrival));
        // Exactly the pending count completes the phase, as on NVIDIA after an inval.
        let gone = up(MbarrierKind::Inval, one_left, 0).0;
        let done = up(ARRIVE, gone, 1).0;
        assert_eq!(done >> PARITY, 1);
    }

    #[test]
    fn random_operations_on_random_words_fault_or_keep_a_barrier_never_panic() {
        // xorshift: words of every shape, counts from 0 to past the 20-bit field.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let kinds = [
            MbarrierKind::Init,
            MbarrierKind::Inval,
            ARRIVE,
            MbarrierKind::Arrive {
                drop: true,
                complete: true,
            },
            MbarrierKind::Arrive {
                drop: false,
                complete: false,
            },
            MbarrierKind::Wait { parity: false },
            MbarrierKind::Wait { parity: true },
        ];
        for _ in 0..200_000 {
            let (r, word) = (next(), next());
            let word = if r & 1 == 0 {
                word
            } else {
                up(MbarrierKind::Init, 0, word & 7).0
            };
            let kind = kinds[(r >> 1) as usize % kinds.len()];
            let a = match r >> 8 & 3 {
                0 => next(),
                _ => next() & 7,
            };
            match update(kind, word, a) {
                Ok((new, _)) => {
                    let keeps = matches!(kind, MbarrierKind::Inval) || holds_barrier(new);
                    assert!(keeps, "{kind:?} on {word:#x} with {a} left {new:#x}");
                }
                Err(Misuse::NotABarrier) => assert!(!holds_barrier(word)),
                Err(Misuse::OverArrival) => assert!(a > word & MASK),
            }
        }
    }
}
