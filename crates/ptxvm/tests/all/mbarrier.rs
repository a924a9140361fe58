//! `mbarrier` on ptxvm: a phase completes only when every expected arrival is in, waits by
//! state and by parity see it, phases alternate, warps spinning in `try_wait` let the others
//! run to arrive, and `cp.async.mbarrier.arrive` arrives for a thread's copies; what ptxvm
//! does not run is `Unsupported` (the sandbox's side is mbarrier_sandbox.rs). An arrival on a
//! word that holds no
//! barrier, or past a phase's pending count, faults with a message saying what to do, as the
//! H100 faults there (session 37).

use ptxvm::FaultKind;

use crate::harness::{Arg, DevMem, Shape};
use crate::text::{HEAD, go, load};

/// Each of 128 threads (four warps) stores its value in shared memory and arrives; after the
/// phase completes (a `try_wait.parity` spin, or a `test_wait` by state), each thread sums
/// every value. Twice, through phases 0 and 1, the second round's values doubled; a thread
/// writes both sums. Warp 3 idles first, so the others' waits spin until it arrives.
pub(crate) fn exchange(wait: &str) -> String {
    let spin = |phase: u32, lab: &str| match wait {
        "parity" => format!(
            "{lab}: mbarrier.try_wait.parity.shared.b64 %p1, [bar], {phase};\n\t@!%p1 bra {lab};"
        ),
        _ => format!("{lab}: mbarrier.test_wait.shared.b64 %p1, [bar], %st;\n\t@!%p1 bra {lab};"),
    };
    let (w0, w1) = (spin(0, "W0"), spin(1, "W1"));
    format!(
        r#"{HEAD}
.visible .entry ex(.param .u64 out, .param .u32 idle)
{{
	.shared .align 8 .b64 bar;
	.shared .align 4 .u32 vals[128];
	.reg .pred %p<3>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<4>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [out];
	ld.param.u32 %r9, [idle];
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra INITED;
	mbarrier.init.shared.b64 [bar], 128;
INITED:
	bar.sync 0;
	mov.u32 %r10, 0;
	shr.u32 %r2, %r1, 5;
	setp.ne.u32 %p2, %r2, 3;
	@%p2 bra ROUND;
IDLE:
	add.u32 %r10, %r10, 1;
	setp.lt.u32 %p2, %r10, %r9;
	@%p2 bra IDLE;
ROUND:
	mov.u32 %r11, 1;
	mov.u32 %r8, 0;
AGAIN:
	mul.lo.u32 %r3, %r1, 3;
	add.u32 %r3, %r3, 7;
	mul.lo.u32 %r3, %r3, %r11;
	shl.b32 %r4, %r1, 2;
	mov.u32 %r5, vals;
	add.u32 %r5, %r5, %r4;
	st.shared.u32 [%r5], %r3;
	mbarrier.arrive.shared.b64 %st, [bar];
	setp.eq.u32 %p2, %r11, 2;
	@%p2 bra SECOND;
	{w0}
	bra SUM;
SECOND:
	{w1}
SUM:
	mov.u32 %r6, 0;
	mov.u32 %r7, 0;
LOOP:
	shl.b32 %r4, %r7, 2;
	mov.u32 %r5, vals;
	add.u32 %r5, %r5, %r4;
	ld.shared.u32 %r4, [%r5];
	add.u32 %r6, %r6, %r4;
	add.u32 %r7, %r7, 1;
	setp.lt.u32 %p2, %r7, 128;
	@%p2 bra LOOP;
	mul.wide.u32 %rd2, %r1, 8;
	add.u64 %rd3, %rd1, %rd2;
	shl.b32 %r4, %r8, 2;
	cvt.u64.u32 %rd2, %r4;
	add.u64 %rd3, %rd3, %rd2;
	st.global.u32 [%rd3], %r6;
	// Everyone has read round one's values before round two overwrites them.
	bar.sync 0;
	add.u32 %r8, %r8, 1;
	add.u32 %r11, %r11, 1;
	setp.le.u32 %p2, %r11, 2;
	@%p2 bra AGAIN;
	ret;
}}
"#
    )
}

/// Warp 3 of `exchange(wait)` idles for `IDLE` trips, longer than a time slice, so the others
/// wait on it for real.
const IDLE: u32 = 40_000;

/// Runs `exchange(wait)` on one block of 128 threads: its launch's counts and its output bytes.
fn run_exchange(wait: &str) -> (ptxvm::LaunchStats, Vec<u8>) {
    let m = load(&exchange(wait));
    let mut mem = DevMem::new();
    let out = mem.upload(&[0u8; 128 * 8]);
    let args = [Arg::Ptr(out), Arg::U32(IDLE)];
    let stats =
        go(&m, &Shape::linear(1, 128), &args, &[], &mem).unwrap_or_else(|e| panic!("{wait}: {e}"));
    (stats, mem.download(out, 128 * 8))
}

#[test]
fn a_phase_waits_for_every_arrival_and_phases_alternate() {
    // Sum over t of 3t + 7, then doubled.
    let round: u32 = (0..128u32).map(|t| 3 * t + 7).sum();
    for wait in ["parity", "state"] {
        let (_, got) = run_exchange(wait);
        for t in 0..128 {
            let sums: Vec<u32> = (0..2)
                .map(|k| u32::from_le_bytes(got[t * 8 + k * 4..][..4].try_into().unwrap()))
                .collect();
            assert_eq!(sums, [round, 2 * round], "{wait}: thread {t}");
        }
    }
}

/// A wait that finds its phase incomplete ends its warp's time slice, so the warps that will
/// complete the phase run instead of the spin: waiting three warps on a fourth that idles for
/// 40,000 trips (about 120,000 instructions) costs little more than the idling itself, where
/// spinning out each slice cost three warps 65,536 instructions a slice.
#[test]
fn a_failed_wait_ends_its_warps_time_slice_so_waiting_costs_little() {
    for wait in ["parity", "state"] {
        let (stats, _) = run_exchange(wait);
        let idling = 3 * u64::from(IDLE);
        assert!(
            stats.warp_instructions < idling + idling / 4,
            "{wait}: {} warp instructions, the idling alone {idling}",
            stats.warp_instructions
        );
    }
}

/// 64 threads copy one word each into shared memory with `cp.async`, arrive through
/// `cp.async.mbarrier.arrive` (`.noinc`: the copy's arrival is the thread's; without it, the
/// thread arrives itself too), wait, and each sums every copied word.
pub(crate) fn pipeline(noinc: bool) -> String {
    let arrive = if noinc {
        "cp.async.mbarrier.arrive.noinc.shared.b64 [bar];"
    } else {
        "cp.async.mbarrier.arrive.shared.b64 [bar];\n\tmbarrier.arrive.shared.b64 %st, [bar];"
    };
    format!(
        r#"{HEAD}
.visible .entry pipe(.param .u64 inp, .param .u64 out)
{{
	.shared .align 8 .b64 bar;
	.shared .align 16 .b32 buf[64];
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	.reg .b64 %st;
	ld.param.u64 %rd1, [inp];
	ld.param.u64 %rd2, [out];
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p0, %r1, 0;
	@%p0 bra INITED;
	mbarrier.init.shared.b64 [bar], 64;
INITED:
	bar.sync 0;
	mul.wide.u32 %rd3, %r1, 4;
	add.u64 %rd4, %rd1, %rd3;
	mov.u64 %rd5, buf;
	add.u64 %rd5, %rd5, %rd3;
	cp.async.ca.shared.global [%rd5], [%rd4], 4;
	{arrive}
WAIT:
	mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
	@!%p1 bra WAIT;
	mov.u32 %r2, 0;
	mov.u32 %r3, 0;
SUM:
	shl.b32 %r4, %r3, 2;
	mov.u32 %r5, buf;
	add.u32 %r5, %r5, %r4;
	ld.shared.u32 %r6, [%r5];
	add.u32 %r2, %r2, %r6;
	add.u32 %r3, %r3, 1;
	setp.lt.u32 %p2, %r3, 64;
	@%p2 bra SUM;
	add.u64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r2;
	ret;
}}
"#
    )
}

#[test]
fn cp_async_copies_are_seen_once_their_mbarrier_phase_completes() {
    let words: Vec<u32> = (0..64).map(|t| t * t + 1).collect();
    let total: u32 = words.iter().sum();
    for noinc in [true, false] {
        let m = load(&pipeline(noinc));
        let mut mem = DevMem::new();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (inp, out) = (mem.upload(&bytes), mem.upload(&[0u8; 256]));
        let args = [Arg::Ptr(inp), Arg::Ptr(out)];
        go(&m, &Shape::linear(1, 64), &args, &[], &mem).unwrap_or_else(|e| panic!("{e}"));
        let got = mem.download(out, 256);
        for t in 0..64 {
            let sum = u32::from_le_bytes(got[t * 4..][..4].try_into().unwrap());
            assert_eq!(sum, total, "noinc {noinc}: thread {t}");
        }
    }
}

#[test]
fn mbarrier_forms_ptxvm_does_not_run_are_unsupported_and_the_sandbox_rewrites_those_it_runs() {
    let kernel = |line: &str| {
        format!(
            "{HEAD}.visible .entry k() {{ .shared .align 8 .b64 bar; .reg .b64 %st; \
             .reg .pred %p; .reg .b32 %r;\n{line}\nret; }}"
        )
    };
    for (line, why) in [
        ("mbarrier.expect_tx.shared.b64 [bar], 64;", "expect_tx"),
        (
            "mbarrier.arrive.shared::cluster.b64 %st, [bar];",
            "shared::cluster",
        ),
        ("mbarrier.pending_count.b64 %r, %st;", "pending_count"),
        // Only try_wait takes a suspend-time hint.
        (
            "mbarrier.test_wait.shared.b64 %p, [bar], %st, 5;",
            "too many operands",
        ),
        (
            "mbarrier.arrive.shared.b64 %st, [bar], 1, 2;",
            "too many operands",
        ),
    ] {
        let e = ptxvm::Module::load(&kernel(line))
            .expect_err(line)
            .to_string();
        assert!(e.contains(why) && e.contains("line"), "{line}: {e}");
    }
    // Every form ptxvm runs (each also accepted by ptxas 13.0 for sm_90).
    let ok = kernel(
        "mbarrier.init.shared.b64 [bar], 32;\n\
         mbarrier.arrive.shared.b64 %st, [bar];\n\
         mbarrier.arrive.noComplete.shared.b64 %st, [bar], 2;\n\
         mbarrier.arrive_drop.shared.b64 %st, [bar];\n\
         mbarrier.arrive.release.cta.shared.b64 %st, [bar];\n\
         mbarrier.try_wait.parity.shared.b64 %p, [bar], 0;\n\
         mbarrier.test_wait.shared.b64 %p, [bar], %st;\n\
         mbarrier.try_wait.acquire.cta.shared.b64 %p, [bar], %st, 1000;\n\
         mbarrier.inval.shared.b64 [bar];",
    );
    ptxvm::Module::load(&ok).expect("every form ptxvm runs loads");
    let policy = ptxvm::sandbox::Policy::default();
    for text in [
        ok,
        kernel("cp.async.mbarrier.arrive.noinc.shared.b64 [bar];"),
    ] {
        ptxvm::Module::load(&text).expect("loads");
        let s = ptxvm::sandbox::sandbox(&text, &policy)
            .unwrap_or_else(|e| panic!("the sandbox rewrites every form ptxvm runs: {e}"));
        // As software barriers: no mbarrier instruction is left.
        assert!(!s.ptx.contains("mbarrier."), "{}", s.ptx);
        ptxvm::Module::load(&s.ptx).unwrap_or_else(|e| panic!("rewritten: {e}\n{}", s.ptx));
    }
}

#[test]
fn arrivals_on_a_word_that_holds_no_barrier_or_past_the_pending_count_fault_and_say_why() {
    let kernel = |setup: &str, arrive: &str| {
        load(&format!(
            ".visible .entry k() {{ .shared .align 8 .b64 bar; .reg .b64 %st; \
             .reg .pred %p; .reg .b32 %r;\n\
             mov.u32 %r, %tid.x; setp.ne.u32 %p, %r, 0; @%p bra DONE;\n\
             {setup}\n{arrive}\nDONE: ret; }}"
        ))
    };
    let mem = DevMem::new();
    let run = |m: &ptxvm::Module| go(m, &Shape::linear(1, 32), &[], &[], &mem);
    // A word of garbage (zero, all ones, as a thread's store left it): no barrier.
    for word in ["0", "-1", "5"] {
        let m = kernel(
            &format!("st.shared.u64 [bar], {word};"),
            "mbarrier.arrive.shared.b64 %st, [bar];",
        );
        let f = run(&m).expect_err("an arrival on garbage faults");
        assert!(
            matches!(f.kind, FaultKind::NotABarrier { .. }),
            "{word}: {f}"
        );
        assert!(f.to_string().contains("mbarrier.init"), "{f}");
    }
    // A barrier of one arrival, arrived on with a count of 3.
    let m = kernel(
        "mbarrier.init.shared.b64 [bar], 1;",
        "mbarrier.arrive.shared.b64 %st, [bar], 3;",
    );
    let f = run(&m).expect_err("an over-arrival faults");
    assert!(
        matches!(f.kind, FaultKind::BarrierOverArrival { .. }),
        "{f}"
    );
    assert!(
        f.to_string().contains("count given to mbarrier.init"),
        "{f}"
    );
    // The same barrier, arrived on once, and once more after inval (as NVIDIA lets it):
    // no fault.
    let m = kernel(
        "mbarrier.init.shared.b64 [bar], 1;",
        "mbarrier.arrive.shared.b64 %st, [bar];\n\
         mbarrier.inval.shared.b64 [bar];\n\
         mbarrier.arrive.shared.b64 %st, [bar];",
    );
    run(&m).expect("arrivals within the count run");
}
