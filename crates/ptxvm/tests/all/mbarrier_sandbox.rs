//! `mbarrier` through the sandbox (ptxvm's sandbox/mbarrier.rs runs it as software barriers on
//! the guest's own shared words): legal programs — a phase exchange by parity and by state, a
//! `cp.async` pipeline arriving through `cp.async.mbarrier.arrive`, a CUTLASS-style
//! producer/consumer ring of full and empty barriers whose consumers leave by `arrive_drop`,
//! barriers through generic addresses (the last two testkit's, which conformance runs on the
//! driver too) — give the bytes they give unsandboxed, with nothing reported; random defined
//! sequences of operations wait as ptxvm's own `mbarrier` does; forms the sandbox does not run
//! are refused naming their line. The attacks are in redteam/mbarrier.rs.

use std::sync::atomic::Ordering;

use ptxvm::Error;
use ptxvm::sandbox::{Policy, sandbox};

use crate::harness::{DevMem, Shape as PlainShape};
use crate::mbarrier::{exchange, pipeline};
use crate::sandbox::{Arg, FAULT, GuestMem, Hidden, Shape, load_sandboxed, run_sandboxed};
use crate::text::{HEAD, go, load};
use testkit::mbarrier::{GENERIC, RING, generic_sum, ring_sums};

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

#[test]
fn barriers_through_generic_shared_addresses_give_the_same_sums_sandboxed() {
    let (plain, boxed) = both(GENERIC, "gen", (1, 64), &[&[0u8; 256]], &[]);
    assert_eq!(plain, boxed);
    assert!(words(&boxed[0]).iter().all(|&s| s == generic_sum()));
}

/// 64 threads arrive and wait in a device function given the barrier's generic address (the
/// function's shared window is its caller's), after storing a value each; then each sums them.
const IN_A_FUNCTION: &str = r#"
.func sync_on(.param .u64 b)
{
	.reg .b64 %a;
	.reg .b64 %st;
	.reg .pred %q;
	ld.param.u64 %a, [b];
	mbarrier.arrive.b64 %st, [%a];
W:
	mbarrier.test_wait.b64 %q, [%a], %st;
	@!%q bra W;
	ret;
}
.visible .entry fn_bar(.param .u64 out)
{
	.shared .align 8 .b64 bar;
	.shared .align 4 .u32 vals[64];
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p0, %r1, 0;
	@%p0 mbarrier.init.shared.b64 [bar], 64;
	bar.sync 0;
	mad.lo.u32 %r2, %r1, 3, 1;
	shl.b32 %r3, %r1, 2;
	mov.u32 %r4, vals;
	add.u32 %r4, %r4, %r3;
	st.shared.u32 [%r4], %r2;
	cvta.shared.u64 %rd2, bar;
	{
	.param .b64 p;
	st.param.b64 [p], %rd2;
	call.uni sync_on, (p);
	}
	mov.u32 %r5, 0;
	mov.u32 %r6, vals;
	add.u32 %r7, %r6, 256;
SUM:
	ld.shared.u32 %r2, [%r6];
	add.u32 %r5, %r5, %r2;
	add.u32 %r6, %r6, 4;
	setp.lt.u32 %p1, %r6, %r7;
	@%p1 bra SUM;
	mul.wide.u32 %rd3, %r1, 4;
	add.u64 %rd4, %rd1, %rd3;
	st.global.u32 [%rd4], %r5;
	ret;
}
"#;

#[test]
fn a_barrier_used_in_a_device_function_gives_the_same_sums_sandboxed() {
    let (plain, boxed) = both(IN_A_FUNCTION, "fn_bar", (2, 64), &[&[0u8; 256]], &[]);
    assert_eq!(plain, boxed);
    let total: u32 = (0..64u32).map(|t| 3 * t + 1).sum();
    assert!(
        words(&boxed[0]).iter().all(|&s| s == total),
        "{:?}",
        words(&boxed[0])
    );
}

/// A random straight-line program of one thread on one barrier, kept to what the ISA defines
/// (and ptxvm's own `mbarrier` runs without a fault): inits, arrivals of at most the pending
/// count (`.noComplete` ones below it), drops that leave an arrival expected, waits by parity,
/// and waits by a state of the current or the previous phase. Each wait's answer goes to
/// `out[k]`; the number of waits.
fn random_program(seed: u64) -> (String, usize) {
    let mut rng = crate::harness::Rng::new(seed);
    let mut pick = |n: u32| rng.next_u32() % n;
    // The model: expected and pending arrivals, completed phases, and each state slot's phase.
    let (mut expected, mut pending, mut phase) = (4u32, 4u32, 0u32);
    let mut slots: [Option<u32>; 4] = [None; 4];
    let mut code = String::from("mbarrier.init.shared.b64 [bar], 4;\n");
    let mut waits = 0;
    for _ in 0..80 {
        match pick(7) {
            0 => {
                let k = 1 + pick(6);
                code.push_str(&format!("mbarrier.init.shared.b64 [bar], {k};\n"));
                (expected, pending) = (k, k);
                phase = 0;
                slots = [None; 4];
            }
            1 | 2 => {
                let (c, j) = (1 + pick(pending), pick(4) as usize);
                code.push_str(&format!("mbarrier.arrive.shared.b64 %s{j}, [bar], {c};\n"));
                slots[j] = Some(phase);
                pending -= c;
                if pending == 0 {
                    (pending, phase) = (expected, phase + 1);
                }
            }
            3 if pending >= 2 => {
                let (c, j) = (1 + pick(pending - 1), pick(4) as usize);
                code.push_str(&format!(
                    "mbarrier.arrive.noComplete.shared.b64 %s{j}, [bar], {c};\n"
                ));
                slots[j] = Some(phase);
                pending -= c;
            }
            4 if expected >= 2 => {
                let c = 1 + pick(pending.min(expected - 1));
                code.push_str(&format!(
                    "mbarrier.arrive_drop.shared.b64 %s0, [bar], {c};\n"
                ));
                slots[0] = Some(phase);
                expected -= c;
                pending -= c;
                if pending == 0 {
                    (pending, phase) = (expected, phase + 1);
                }
            }
            5 => {
                let (p, op) = (pick(2), ["test_wait", "try_wait"][pick(2) as usize]);
                code.push_str(&format!(
                    "mbarrier.{op}.parity.shared.b64 %p1, [bar], {p};\n\
                     selp.u32 %r1, 1, 2, %p1;\nst.global.u32 [%rd1+{}], %r1;\n",
                    4 * waits
                ));
                waits += 1;
            }
            _ => {
                let j = pick(4) as usize;
                if slots[j].is_some_and(|at| phase - at <= 1) {
                    code.push_str(&format!(
                        "mbarrier.test_wait.shared.b64 %p1, [bar], %s{j};\n\
                         selp.u32 %r1, 1, 2, %p1;\nst.global.u32 [%rd1+{}], %r1;\n",
                        4 * waits
                    ));
                    waits += 1;
                }
            }
        }
    }
    let body = format!(
        ".visible .entry seq(.param .u64 out)\n{{\n.shared .align 8 .b64 bar;\n\
         .reg .pred %p<2>;\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n.reg .b64 %s<4>;\n\
         ld.param.u64 %rd1, [out];\n{code}ret;\n}}\n"
    );
    (body, waits)
}

/// The software barrier's answers are ptxvm's (whose layout and faults follow NVIDIA's
/// hardware) for every defined sequence of operations: 200 random programs of 80 operations.
#[test]
fn random_sequences_of_barrier_operations_wait_as_ptxvms_mbarrier_does() {
    // Waits that saw their phase complete, and that did not.
    let mut seen = [0usize; 2];
    for seed in 1..=200 {
        let (body, waits) = random_program(seed);
        let (plain, boxed) = both(&body, "seq", (1, 1), &[&vec![0u8; 4 * waits.max(1)]], &[]);
        assert_eq!(plain, boxed, "seed {seed}:\n{body}");
        for w in words(&boxed[0]).into_iter().take(waits) {
            seen[usize::from(w == 2)] += 1;
        }
    }
    assert!(seen[0] > 500 && seen[1] > 500, "complete / not: {seen:?}");
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

/// One warp's lanes arrive together on two barriers, a third of them on one (11 lanes) and the
/// rest on the other (21), three phases each, then record the phases they saw.
const SPLIT: &str = "
.visible .entry split(.param .u64 out)
{
.shared .align 8 .b64 bars[2];
.reg .pred %p<3>;
.reg .b32 %r<8>;
.reg .b64 %rd<6>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra INITED;
mbarrier.init.shared.b64 [bars], 11;
mbarrier.init.shared.b64 [bars+8], 21;
INITED:
bar.sync 0;
rem.u32 %r2, %r1, 3;
setp.eq.u32 %p2, %r2, 0;
selp.u32 %r3, 0, 8, %p2;
mov.u32 %r4, bars;
add.u32 %r4, %r4, %r3;
mov.u32 %r6, 0;
ROUND:
mbarrier.arrive.shared.b64 %rd2, [%r4];
WAIT:
mbarrier.test_wait.shared.b64 %p1, [%r4], %rd2;
@!%p1 bra WAIT;
add.u32 %r6, %r6, 1;
setp.lt.u32 %p1, %r6, 3;
@%p1 bra ROUND;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd1, %rd3;
st.global.u32 [%rd4], %r6;
ret;
}
";

/// Lanes of one warp arriving together on two barriers at the same instruction, one add each
/// (32-bit adds on one word, in any order): exactly one lane per barrier completes each phase
/// and every lane sees its three phases, with a count of one or a register count. (Session 43
/// made such arrivals one add per warp and group, and measured it slower on an H100: the
/// match and shuffle cost more than the adds they saved; bench/RESULTS.md.)
#[test]
fn a_warp_split_between_two_barriers_completes_each_phase_once() {
    let (plain, boxed) = both(SPLIT, "split", (1, 32), &[&[0u8; 128]], &[]);
    assert_eq!(plain, boxed);
    assert!(
        words(&boxed[0]).iter().all(|&r| r == 3),
        "{:?}",
        words(&boxed[0])
    );
    let counted = SPLIT
        .replace(".reg .b32 %r<8>;", ".reg .b32 %r<8>;\n.reg .b32 %c;")
        .replace("mov.u32 %r6, 0;", "mov.u32 %r6, 0;\nmov.u32 %c, 1;")
        .replace("[%r4];\nWAIT", "[%r4], %c;\nWAIT");
    assert!(counted.contains("[%r4], %c;"), "{counted}");
    let (plain, boxed) = both(&counted, "split", (1, 32), &[&[0u8; 128]], &[]);
    assert_eq!(plain, boxed);
    assert!(
        words(&boxed[0]).iter().all(|&r| r == 3),
        "{:?}",
        words(&boxed[0])
    );
}
