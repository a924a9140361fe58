//! Forward progress within a warp (vm/schedule.rs): a lane spinning on a flag that a lane of
//! its own warp sets further on, and lanes of one warp taking a lock in turn, finish as on
//! sm_70 and later; a divergent loop long enough to step aside still reconverges before a warp
//! collective and a block barrier. Each launch has a deadline, so a scheduler that lets a
//! spinner starve the others fails with a timeout instead of hanging the suite.

use std::time::{Duration, Instant};

use ptxvm::{Launch, LaunchStats, Module};

use crate::harness::{Arg, DevMem, pack};
use crate::launch::launch;
use crate::text::load;

/// Runs kernel 0 of `m` on one block of `threads`, stopped with a timeout after 30 s.
fn run_for(m: &Module, threads: u32, args: &[Arg], mem: &DevMem) -> LaunchStats {
    let params = pack(&m.kernels()[0], args);
    let l = Launch {
        block: [threads, 1, 1],
        deadline: Some(Instant::now() + Duration::from_secs(30)),
        ..launch(0, &params)
    };
    ptxvm::launch(m, &l, mem).unwrap_or_else(|e| panic!("{e}"))
}

/// Lane 0 spins on a shared flag in code placed before the code where lane 7 sets it: the
/// order "furthest behind first" alone runs lane 0 for ever.
const FLAG: &str = r#"
.visible .entry flag(.param .u64 out)
{
	.shared .align 4 .u32 flag;
	.reg .pred %p<3>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra CLEARED;
	st.shared.u32 [flag], 0;
CLEARED:
	bar.sync 0;
	@%p0 bra PRODUCER;
SPIN:
	ld.volatile.shared.u32 %r2, [flag];
	setp.eq.u32 %p1, %r2, 0;
	@%p1 bra SPIN;
	bra DONE;
PRODUCER:
	setp.ne.u32 %p2, %r1, 7;
	@%p2 bra DONE;
	st.volatile.shared.u32 [flag], 42;
DONE:
	ld.volatile.shared.u32 %r3, [flag];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	ret;
}
"#;

#[test]
fn a_lane_spinning_on_a_flag_set_later_in_its_own_warp_sees_it_set() {
    let m = load(FLAG);
    let mut mem = DevMem::new();
    let out = mem.alloc(32 * 4);
    run_for(&m, 32, &[Arg::Ptr(out)], &mem);
    assert_eq!(mem.download::<u32>(out, 32), vec![42u32; 32]);
}

/// Every thread takes one global lock (`atom.cas`), adds one to a counter with a plain load and
/// store, and lets go: losers loop back to the CAS, the winner runs on past the loop, so the
/// losers are always behind it.
const LOCK: &str = r#"
.visible .entry lock(.param .u64 lockp, .param .u64 count)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [lockp];
	ld.param.u64 %rd2, [count];
TRY:
	atom.global.cas.b32 %r1, [%rd1], 0, 1;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra TRY;
	ld.volatile.global.u32 %r2, [%rd2];
	add.u32 %r2, %r2, 1;
	st.volatile.global.u32 [%rd2], %r2;
	membar.gl;
	atom.global.exch.b32 %r3, [%rd1], 0;
	ret;
}
"#;

#[test]
fn lanes_of_one_warp_take_a_spin_lock_in_turn() {
    let m = load(LOCK);
    let mut mem = DevMem::new();
    let (lock, count) = (mem.alloc(4), mem.alloc(4));
    run_for(&m, 64, &[Arg::Ptr(lock), Arg::Ptr(count)], &mem);
    assert_eq!(
        mem.download::<u32>(count, 1),
        vec![64],
        "one increment per thread"
    );
    assert_eq!(mem.download::<u32>(lock, 1), vec![0], "the lock is free");
}

/// Lane `l` loops `l * 40` times (lane 31: 1240 back-edges, several times the threshold at
/// which a spinning group steps aside), then the warp sums the counts by `shfl.sync.bfly`,
/// passes a block barrier and a `bar.warp.sync`, and writes the sum.
const LONG_LOOP: &str = r#"
.visible .entry long_loop(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	and.b32 %r6, %r1, 31;
	mul.lo.u32 %r2, %r6, 40;
	mov.u32 %r3, 0;
	setp.eq.u32 %p0, %r2, 0;
	@%p0 bra SUM;
LOOP:
	add.u32 %r3, %r3, 1;
	setp.lt.u32 %p1, %r3, %r2;
	@%p1 bra LOOP;
SUM:
	shfl.sync.bfly.b32 %r4, %r3, 16, 31, -1;
	add.u32 %r3, %r3, %r4;
	shfl.sync.bfly.b32 %r4, %r3, 8, 31, -1;
	add.u32 %r3, %r3, %r4;
	shfl.sync.bfly.b32 %r4, %r3, 4, 31, -1;
	add.u32 %r3, %r3, %r4;
	shfl.sync.bfly.b32 %r4, %r3, 2, 31, -1;
	add.u32 %r3, %r3, %r4;
	shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
	add.u32 %r3, %r3, %r4;
	bar.sync 0;
	bar.warp.sync -1;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	ret;
}
"#;

#[test]
fn a_divergent_loop_past_the_yield_threshold_reconverges_before_shuffles_and_barriers() {
    let m = load(LONG_LOOP);
    let mut mem = DevMem::new();
    let out = mem.alloc(64 * 4);
    let stats = run_for(&m, 64, &[Arg::Ptr(out)], &mem);
    let sum: u32 = (0..32).map(|l| l * 40).sum();
    assert_eq!(mem.download::<u32>(out, 64), vec![sum; 64]);
    // Each lane's instructions, once each, whoever waited for whom: six before the branch to
    // SUM (which lane 0 alone takes), per trip an add, a setp and the back-edge (taken on all
    // but the last trip), then sixteen.
    let lane = |l: u64| {
        if l == 0 {
            6 + 1 + 16
        } else {
            6 + 3 * 40 * l - 1 + 16
        }
    };
    assert_eq!(
        stats.lane_instructions,
        2 * (0..32).map(lane).sum::<u64>(),
        "an instruction that waited for the lanes that stepped aside counted once"
    );
}

/// Lanes 0–15 wait on an `mbarrier` phase (the wait's loop first in the code) that lanes 16–31
/// complete further on, each after storing a value the waiting lane then reads: a producer
/// and a consumer in one warp, the case docs/SOFTCUDA.md once listed as a livelock.
const MBARRIER_PAIRS: &str = r#"
.visible .entry pairs(.param .u64 out)
{
	.shared .align 8 .b64 bar;
	.shared .align 4 .u32 vals[32];
	.reg .pred %p<3>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<4>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra INITED;
	mbarrier.init.shared.b64 [bar], 16;
INITED:
	bar.sync 0;
	setp.ge.u32 %p1, %r1, 16;
	@%p1 bra PRODUCE;
WAIT:
	mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
	@!%p2 bra WAIT;
	add.u32 %r2, %r1, 16;
	shl.b32 %r3, %r2, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	ld.shared.u32 %r5, [%r4];
	bra OUT;
PRODUCE:
	mul.lo.u32 %r5, %r1, 3;
	shl.b32 %r3, %r1, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	st.shared.u32 [%r4], %r5;
	mbarrier.arrive.shared.b64 %st, [bar];
OUT:
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;
	ret;
}
"#;

#[test]
fn mbarrier_waiters_and_arrivers_in_one_warp_complete_the_phase() {
    let m = load(MBARRIER_PAIRS);
    let mut mem = DevMem::new();
    let out = mem.alloc(32 * 4);
    run_for(&m, 32, &[Arg::Ptr(out)], &mem);
    let want: Vec<u32> = (0..32)
        .map(|l| 3 * if l < 16 { l + 16 } else { l })
        .collect();
    assert_eq!(mem.download::<u32>(out, 32), want);
}
