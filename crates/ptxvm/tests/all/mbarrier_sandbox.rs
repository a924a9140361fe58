//! `mbarrier` through the sandbox (ptxvm's sandbox/mbarrier.rs runs it as software barriers on
//! the guest's own shared words): legal programs — a phase exchange by parity and by state, a
//! `cp.async` pipeline arriving through `cp.async.mbarrier.arrive`, a CUTLASS-style
//! producer/consumer ring of full and empty barriers whose consumers leave by `arrive_drop`,
//! barriers through generic addresses — give the bytes they give unsandboxed, with nothing
//! reported; forms the sandbox does not run are refused naming their line. The attacks are in
//! redteam/mbarrier.rs.

use std::sync::atomic::Ordering;

use ptxvm::Error;
use ptxvm::sandbox::{Policy, sandbox};

use crate::harness::{DevMem, Shape as PlainShape};
use crate::mbarrier::{exchange, pipeline};
use crate::sandbox::{Arg, FAULT, GuestMem, Hidden, Shape, load_sandboxed, run_sandboxed};
use crate::text::{HEAD, go, load};

/// The launch's epoch in these tests.
const EPOCH: u32 = 5;

/// Runs kernel 0 (`name`) of `body` unsandboxed and rewritten, each on its own copy of the
/// buffers `bufs` (passed as pointers, in order, then `scalars`), and gives every buffer's
/// bytes after each; the rewritten run must report nothing.
fn both(
    body: &str,
    name: &str,
    (grid, block): (u32, u32),
    bufs: &[&[u8]],
    scalars: &[u32],
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let plain = {
        let m = load(body);
        let mut mem = DevMem::new();
        let ptrs: Vec<u64> = bufs.iter().map(|b| mem.upload(b)).collect();
        let args: Vec<_> = ptrs
            .iter()
            .map(|&p| crate::harness::Arg::Ptr(p))
            .chain(scalars.iter().map(|&v| crate::harness::Arg::U32(v)))
            .collect();
        go(&m, &PlainShape::linear(grid, block), &args, &[], &mem)
            .unwrap_or_else(|f| panic!("{name} unsandboxed: {f}"));
        let got: Vec<Vec<u8>> = ptrs
            .iter()
            .zip(bufs)
            .map(|(&p, b)| mem.download(p, b.len()))
            .collect();
        got
    };
    let (_, m) = load_sandboxed(&format!("{HEAD}{body}"));
    let mut mem = GuestMem::new();
    let ptrs: Vec<u64> = bufs
        .iter()
        .map(|b| {
            let p = mem.alloc(b.len());
            mem.write(p, b);
            p
        })
        .collect();
    let args: Vec<Arg> = ptrs
        .iter()
        .map(|&p| Arg::U64(p))
        .chain(scalars.iter().map(|&v| Arg::U32(v)))
        .collect();
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    run_sandboxed(&m, name, Shape::linear(grid, block), &args, &hidden, &mem)
        .unwrap_or_else(|f| panic!("{name} sandboxed: {f}"));
    assert_eq!(
        mem.ctl_word(FAULT).load(Ordering::SeqCst),
        0,
        "{name}: a legal program reports nothing"
    );
    let got = ptrs
        .iter()
        .zip(bufs)
        .map(|(&p, b)| mem.read(p, b.len()))
        .collect();
    (plain, got)
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn phases_exchanged_by_parity_and_by_state_give_the_same_sums_sandboxed() {
    let round: u32 = (0..128u32).map(|t| 3 * t + 7).sum();
    for wait in ["parity", "state"] {
        // The exchange's text starts with its own header; `both` adds HEAD to the rewrite.
        let body = exchange(wait).replacen(HEAD, "", 1);
        // Warp 3 idles 40,000 iterations, so the others spin in their waits for real.
        let (plain, boxed) = both(&body, "ex", (1, 128), &[&[0u8; 128 * 8]], &[40_000]);
        assert_eq!(plain, boxed, "{wait}");
        let sums = words(&boxed[0]);
        for t in 0..128 {
            assert_eq!(
                sums[2 * t..2 * t + 2],
                [round, 2 * round],
                "{wait}: thread {t}"
            );
        }
    }
}

#[test]
fn a_cp_async_pipeline_arriving_through_cp_async_mbarrier_arrive_gives_the_same_sums_sandboxed() {
    let words_in: Vec<u32> = (0..64).map(|t| t * t + 1).collect();
    let bytes: Vec<u8> = words_in.iter().flat_map(|w| w.to_le_bytes()).collect();
    let total: u32 = words_in.iter().sum();
    for noinc in [true, false] {
        let body = pipeline(noinc).replacen(HEAD, "", 1);
        let (plain, boxed) = both(&body, "pipe", (1, 64), &[&bytes, &[0u8; 256]], &[]);
        assert_eq!(plain, boxed, "noinc {noinc}");
        assert!(
            words(&boxed[1]).iter().all(|&s| s == total),
            "noinc {noinc}"
        );
    }
}

/// A CUTLASS-style ring of two stages: warp 0 produces (each lane copies one word of a tile
/// with `cp.async` into the stage's buffer and arrives on the stage's `full` barrier through
/// `cp.async.mbarrier.arrive.noinc`, after waiting for its `empty` barrier), warps 1 and 2
/// consume (wait on `full` by parity, add the word times the tile's number plus one, arrive on
/// `empty`). Warp 2 leaves after tile 1 with `arrive_drop` on both `empty` barriers (the one of
/// stage 0 only once its phase 0 is over, so that the drop counts in phase 1), and the
/// producer's later waits see only warp 1's arrivals. Each consumer thread stores its sum. (A
/// warp leaves whole: lanes of one warp waiting on each other's progress hang a SIMT stack,
/// ptxvm's, that runs one side of a branch to its end first.)
pub(crate) const RING: &str = r#"
.visible .entry ring(.param .u64 inp, .param .u64 out, .param .u32 tiles)
{
	.shared .align 8 .b64 full[2];
	.shared .align 8 .b64 empty[2];
	.shared .align 16 .b32 buf[64];
	.reg .pred %p<7>;
	.reg .b32 %r<20>;
	.reg .b64 %rd<8>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [inp];
	ld.param.u64 %rd2, [out];
	ld.param.u32 %r9, [tiles];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 31;
	shr.u32 %r3, %r1, 5;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra INITED;
	mbarrier.init.shared.b64 [full], 32;
	mbarrier.init.shared.b64 [full+8], 32;
	mbarrier.init.shared.b64 [empty], 64;
	mbarrier.init.shared.b64 [empty+8], 64;
INITED:
	bar.sync 0;
	mov.u32 %r4, 0;
	setp.ne.u32 %p1, %r3, 0;
	@%p1 bra CONSUMER;
PRODUCE:
	setp.ge.u32 %p2, %r4, %r9;
	@%p2 bra DONE;
	and.b32 %r5, %r4, 1;
	shl.b32 %r6, %r5, 3;
	mov.u32 %r7, empty;
	add.u32 %r7, %r7, %r6;
	setp.lt.u32 %p3, %r4, 2;
	@%p3 bra FILL;
	shr.u32 %r8, %r4, 1;
	sub.u32 %r8, %r8, 1;
	and.b32 %r8, %r8, 1;
WAIT_EMPTY:
	mbarrier.try_wait.parity.shared.b64 %p4, [%r7], %r8;
	@!%p4 bra WAIT_EMPTY;
FILL:
	shl.b32 %r10, %r4, 5;
	add.u32 %r10, %r10, %r2;
	mul.wide.u32 %rd3, %r10, 4;
	add.u64 %rd4, %rd1, %rd3;
	shl.b32 %r11, %r5, 5;
	add.u32 %r11, %r11, %r2;
	shl.b32 %r11, %r11, 2;
	mov.u32 %r12, buf;
	add.u32 %r12, %r12, %r11;
	cvt.u64.u32 %rd5, %r12;
	cp.async.ca.shared.global [%rd5], [%rd4], 4;
	mov.u32 %r13, full;
	add.u32 %r13, %r13, %r6;
	cp.async.mbarrier.arrive.noinc.shared.b64 [%r13];
	add.u32 %r4, %r4, 1;
	bra PRODUCE;
CONSUMER:
	mov.u32 %r14, 0;
	setp.eq.u32 %p5, %r3, 2;
CONSUME:
	setp.ge.u32 %p2, %r4, %r9;
	@%p2 bra STORE;
	and.b32 %r5, %r4, 1;
	shl.b32 %r6, %r5, 3;
	mov.u32 %r13, full;
	add.u32 %r13, %r13, %r6;
	shr.u32 %r8, %r4, 1;
	and.b32 %r8, %r8, 1;
WAIT_FULL:
	mbarrier.try_wait.parity.shared.b64 %p4, [%r13], %r8;
	@!%p4 bra WAIT_FULL;
	shl.b32 %r11, %r5, 5;
	add.u32 %r11, %r11, %r2;
	shl.b32 %r11, %r11, 2;
	mov.u32 %r12, buf;
	add.u32 %r12, %r12, %r11;
	ld.shared.u32 %r15, [%r12];
	add.u32 %r16, %r4, 1;
	mad.lo.u32 %r14, %r15, %r16, %r14;
	mov.u32 %r7, empty;
	add.u32 %r7, %r7, %r6;
	setp.eq.u32 %p3, %r4, 1;
	and.pred %p3, %p3, %p5;
	@%p3 bra QUIT;
	mbarrier.arrive.shared.b64 %st, [%r7];
	add.u32 %r4, %r4, 1;
	bra CONSUME;
QUIT:
	mbarrier.arrive_drop.shared.b64 %st, [empty+8];
WAIT_ZERO:
	mbarrier.try_wait.parity.shared.b64 %p6, [empty], 0;
	@!%p6 bra WAIT_ZERO;
	mbarrier.arrive_drop.shared.b64 %st, [empty];
STORE:
	sub.u32 %r17, %r1, 32;
	mul.wide.u32 %rd3, %r17, 4;
	add.u64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r14;
DONE:
	ret;
}
"#;

/// What [`RING`] stores: consumer c's sum over its tiles t of `inp[32 t + c % 32] * (t + 1)`.
pub(crate) fn ring_sums(inp: &[u32], tiles: u32) -> Vec<u32> {
    (0..64u32)
        .map(|c| {
            let (l, last) = (c % 32, if c >= 32 { tiles.min(2) } else { tiles });
            (0..last)
                .map(|t| inp[(32 * t + l) as usize].wrapping_mul(t + 1))
                .fold(0u32, u32::wrapping_add)
        })
        .collect()
}

#[test]
fn a_producer_consumer_ring_with_arrive_drop_gives_the_same_sums_sandboxed() {
    for tiles in [1u32, 2, 3, 8] {
        let inp: Vec<u32> = (0..32 * tiles).map(|k| k * 7 + 3).collect();
        let bytes: Vec<u8> = inp.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (plain, boxed) = both(RING, "ring", (2, 96), &[&bytes, &[0u8; 256]], &[tiles]);
        assert_eq!(plain, boxed, "{tiles} tiles");
        assert_eq!(words(&boxed[1]), ring_sums(&inp, tiles), "{tiles} tiles");
    }
}

/// 64 threads use one barrier through generic addresses (`cvta.shared`), waiting by state:
/// thread 0 initialises it under a guard, and each stores a value, arrives, waits, and sums
/// every value.
const GENERIC: &str = r#"
.visible .entry gen(.param .u64 out)
{
	.shared .align 8 .b64 bar;
	.shared .align 4 .u32 vals[64];
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	cvta.shared.u64 %rd2, bar;
	setp.eq.u32 %p0, %r1, 0;
	@%p0 mbarrier.init.b64 [%rd2], 64;
	bar.sync 0;
	mul.lo.u32 %r2, %r1, 5;
	add.u32 %r2, %r2, 1;
	shl.b32 %r3, %r1, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	st.shared.u32 [%r4], %r2;
	mbarrier.arrive.b64 %st, [%rd2];
WAIT:
	mbarrier.test_wait.b64 %p1, [%rd2], %st;
	@!%p1 bra WAIT;
	mov.u32 %r5, 0;
	mov.u32 %r6, 0;
SUM:
	shl.b32 %r3, %r6, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	ld.shared.u32 %r7, [%r4];
	add.u32 %r5, %r5, %r7;
	add.u32 %r6, %r6, 1;
	setp.lt.u32 %p2, %r6, 64;
	@%p2 bra SUM;
	mul.wide.u32 %rd3, %r1, 4;
	add.u64 %rd4, %rd1, %rd3;
	st.global.u32 [%rd4], %r5;
	mbarrier.inval.b64 [%rd2];
	ret;
}
"#;

#[test]
fn barriers_through_generic_shared_addresses_give_the_same_sums_sandboxed() {
    let (plain, boxed) = both(GENERIC, "gen", (1, 64), &[&[0u8; 256]], &[]);
    assert_eq!(plain, boxed);
    let total: u32 = (0..64u32).map(|t| 5 * t + 1).sum();
    assert!(words(&boxed[0]).iter().all(|&s| s == total));
}

#[test]
fn mbarrier_forms_the_sandbox_does_not_run_are_refused_naming_their_line_and_what_to_do() {
    let kernel = |line: &str| {
        format!(
            "{HEAD}.visible .entry k()\n{{\n.shared .align 8 .b64 bar;\n.reg .b64 %st;\n\
             .reg .pred %p;\n.reg .b32 %r;\n{line}\nret;\n}}\n"
        )
    };
    // Line 10: the header's three, the entry's, the brace, the four declarations.
    for (line, why) in [
        (
            "mbarrier.expect_tx.shared.b64 [bar], 64;",
            "cp.async.mbarrier.arrive",
        ),
        (
            "mbarrier.complete_tx.shared.b64 [bar], 64;",
            "cp.async.bulk",
        ),
        (
            "mbarrier.arrive.expect_tx.shared.b64 %st, [bar], 64;",
            "transaction counts",
        ),
        ("mbarrier.pending_count.b64 %r, %st;", "count arrivals"),
        (
            "mbarrier.arrive.release.cluster.shared.b64 %st, [bar];",
            ".cta scope",
        ),
        (
            "mbarrier.arrive.shared::cluster.b64 %st, [bar];",
            "block's own .shared",
        ),
        (
            "mbarrier.try_wait.parity.shared::cluster.b64 %p, [bar], 0;",
            "block's own .shared",
        ),
        (
            "cp.async.mbarrier.arrive.noinc.shared::cluster.b64 [bar];",
            "cp.async.mbarrier.arrive{.noinc}",
        ),
        ("mbarrier.arrive.shared.b32 %r, [bar];", ".b64"),
        (
            "mbarrier.arrive.parity.shared.b64 %st, [bar];",
            "the sandbox allows",
        ),
    ] {
        match sandbox(&kernel(line), &Policy::default()) {
            Err(Error::Refused { line: at, what }) => {
                assert_eq!(at, 10, "{line}: {what}");
                assert!(what.contains(why), "{line}: {what}");
            }
            other => panic!("{line}: expected a refusal, got {other:?}"),
        }
    }
    // A barrier in global memory, named: refused at load (a generic or shared one through a
    // register is fenced at run time instead).
    let global = format!(
        "{HEAD}.global .align 8 .b64 g;\n.visible .entry k()\n{{\n.reg .b64 %st;\n\
         mbarrier.arrive.b64 %st, [g];\nret;\n}}\n"
    );
    match sandbox(&global, &Policy::default()) {
        Err(Error::Refused { line, what }) => {
            assert_eq!(line, 8, "{what}");
            assert!(what.contains(".shared memory"), "{what}");
        }
        other => panic!("a named global barrier: {other:?}"),
    }
}
