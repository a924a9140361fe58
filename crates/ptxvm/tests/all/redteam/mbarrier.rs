//! Red-team attacks through `mbarrier` (ptxvm's sandbox/mbarrier.rs runs it as software
//! barriers on the guest's own shared words): barriers at out-of-range, wrapped and misaligned
//! shared offsets, at generic addresses that point at another tenant's memory, the guest's own
//! arena, the control block, 0 or unmapped space, and at `.shared` addresses taken from a `u64`
//! scalar; words of garbage and arrivals past the pending count, which lose the context on
//! NVIDIA's hardware barriers (session 37); and a wait on a barrier that never completes. Each
//! stays inside the block's shared window or is skipped, is reported when fenced, never faults,
//! and the endless wait stops at the time limit.

use super::stops::stopped_with;
use super::*;

/// testkit's attack module, rewritten and loaded.
fn module() -> &'static Module {
    static M: OnceLock<Module> = OnceLock::new();
    M.get_or_init(|| load_sandboxed(&testkit::mbarrier::attacks()).1)
}

#[test]
fn barriers_at_shared_offsets_out_of_the_window_are_skipped_and_reported() {
    // Past the window, far past it, wrapped below it, and past a 32-bit address's end.
    for off in [64u32, 4096, 1 << 20, 0xFFFF_FFF8, 0xFFFF_FFFF] {
        let mut out = 0;
        let mem = attack_in(
            module(),
            "mb_offset",
            Shape::linear(2, 64),
            |m| {
                out = m.alloc(4);
                vec![Arg::U64(out), Arg::U32(off)]
            },
            true,
        );
        // A skipped wait reads as over, so a spin on such a barrier ends.
        assert_eq!(mem.read(out, 4), 1u32.to_le_bytes(), "{off:#x}");
    }
}

#[test]
fn misaligned_and_in_window_barriers_are_aligned_down_and_run_unreported() {
    // bar + 3 is bar, aligned down, as every shared access is; pad's words are the guest's own.
    for off in [0u32, 3, 8, 13, 32] {
        attack_in(
            module(),
            "mb_offset",
            Shape::linear(2, 64),
            |m| vec![Arg::U64(m.alloc(4)), Arg::U32(off)],
            false,
        );
    }
}

#[test]
fn shared_barriers_at_addresses_from_u64_scalars_are_skipped_and_reported() {
    // The window check reads an address's low 32 bits, as for every shared access: these lie
    // far past any window.
    for addr in [0xdead_8000_0000u64, u64::MAX - 7, 0x7fff_fff0] {
        attack_in(
            module(),
            "mb_scalar",
            Shape::linear(1, 32),
            |m| vec![Arg::U64(m.alloc(4)), Arg::U64(addr)],
            true,
        );
    }
}

#[test]
fn generic_barriers_at_global_memory_touch_nothing_and_are_reported() {
    for target in ["victim", "arena", "ctl", "zero", "wild"] {
        let (mut buf, mut out) = (0, 0);
        let pattern: Vec<u8> = (0..64u8).collect();
        let mem = attack_in(
            module(),
            "mb_generic",
            Shape::linear(2, 32),
            |m| {
                out = m.alloc(4);
                buf = m.alloc(64);
                m.write(buf, &pattern);
                let addr = match target {
                    "victim" => m.victim() + 8,
                    "arena" => buf + 16,
                    "ctl" => m.ctl(),
                    "zero" => 0,
                    _ => 0xdead_0000_0000,
                };
                vec![Arg::U64(out), Arg::U64(addr)]
            },
            true,
        );
        assert_eq!(
            mem.read(buf, 64),
            pattern,
            "{target}: the arena is unchanged"
        );
        assert_eq!(
            mem.ctl_word(0).load(Ordering::SeqCst),
            EPOCH,
            "{target}: the epoch is unchanged"
        );
        assert_eq!(mem.read(out, 4), 1u32.to_le_bytes(), "{target}");
    }
}

/// Words of garbage and arrivals past the pending count: ptxvm's own `mbarrier` faults there
/// (`FaultKind::NotABarrier`, `BarrierOverArrival`), as NVIDIA's hardware loses the context;
/// rewritten, they are the guest's own data, and nothing faults or is reported.
#[test]
fn barriers_of_garbage_and_over_arrivals_neither_fault_nor_report() {
    for word in [0u64, u64::MAX, 5, 0x0707_0707_0707_0707] {
        attack_in(
            module(),
            "mb_garbage",
            Shape::linear(2, 64),
            |m| vec![Arg::U64(m.alloc(4)), Arg::U64(word)],
            false,
        );
    }
    // The same kernel unsandboxed faults on its first arrival.
    let src = ptx(
        ".visible .entry g(.param .u64 out)\n{\n.shared .align 8 .b64 bar;\n\
         .reg .b64 %st;\nst.shared.u64 [bar], 0;\nmbarrier.arrive.shared.b64 %st, [bar], 3;\n\
         ret;\n}\n",
    );
    let m = Module::load(&src).expect("loads unsandboxed");
    let mem = crate::harness::DevMem::new();
    let f = crate::text::go(
        &m,
        &crate::harness::Shape::linear(1, 1),
        &[crate::harness::Arg::U64(0)],
        &[],
        &mem,
    )
    .expect_err("ptxvm's own mbarrier faults on garbage");
    assert!(matches!(f.kind, FaultKind::NotABarrier { .. }), "{f}");
}

/// A barrier that expects 1,000 arrivals gets 64 per block, and every thread spins in
/// `try_wait` by state: the spin's back-edge polls, so the launch stops at its time limit and
/// names itself in the stopped word; nothing is reported fenced and no wait sees the phase end.
#[test]
fn a_wait_on_a_barrier_that_never_completes_stops_at_the_time_limit() {
    let src = ptx(".visible .entry mb_endless(.param .u64 out)\n{\n\
         .shared .align 8 .b64 bar;\n.reg .pred %p<2>;\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n\
         .reg .b64 %st;\nld.param.u64 %rd1, [out];\nmov.u32 %r1, %tid.x;\n\
         setp.ne.u32 %p0, %r1, 0;\n@%p0 bra INITED;\nmbarrier.init.shared.b64 [bar], 1000;\n\
         INITED:\nbar.sync 0;\nmbarrier.arrive.shared.b64 %st, [bar];\n\
         st.global.u32 [%rd1], 1;\n\
         WAIT:\nmbarrier.try_wait.shared.b64 %p1, [bar], %st;\n@!%p1 bra WAIT;\n\
         selp.u32 %r1, 2, 1, %p1;\nst.global.u32 [%rd1+4], %r1;\nret;\n}\n");
    let (_, m) = load_sandboxed(&src);
    let (stopped, out) = stopped_with(&m, "mb_endless", Duration::from_millis(20), false, &[]);
    assert_eq!(stopped, TAG, "the stopped word names the launch");
    // A thread stopped at the spin's guarded back-edge leaves the loop and runs on to the end
    // (stops.rs), storing 1; one that saw the phase complete would store 2.
    let after = u32::from_le_bytes(out[4..8].try_into().unwrap());
    assert!(
        after <= 1,
        "a wait saw a phase that cannot complete end: {after}"
    );
}
