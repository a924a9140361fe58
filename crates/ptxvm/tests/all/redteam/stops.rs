//! Red-team kernels that run too long: endless loops, loops stopped at guarded back-edges,
//! counted loops in a row, stale epochs at entry; and a long but legal loop that must finish.

use super::*;

/// Runs `kernel` on a thread, bumps the epoch after `after`, and expects a clean exit.
pub(super) fn abort_after(kernel: &str, after: Duration, fenced: bool) {
    abort_in(&fixture().2, kernel, after, fenced);
}

/// `abort_after` on a kernel of another rewritten module.
pub fn abort_in(m: &Module, kernel: &str, after: Duration, fenced: bool) {
    abort_in_with(m, kernel, after, fenced, &[]);
}

/// `abort_in` with `extra` arguments after the output buffer; gives the buffer's 16 bytes.
pub fn abort_in_with(
    m: &Module,
    kernel: &str,
    after: Duration,
    fenced: bool,
    extra: &[Arg],
) -> Vec<u8> {
    stopped_with(m, kernel, after, fenced, extra).1
}

/// [`abort_in_with`], giving the control block's stopped word too.
pub(super) fn stopped_with(
    m: &Module,
    kernel: &str,
    after: Duration,
    fenced: bool,
    extra: &[Arg],
) -> (u32, Vec<u8>) {
    let mut mem = GuestMem::new();
    let out = mem.alloc(16);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            run_sandboxed(
                m,
                kernel,
                Shape::linear(2, 64),
                &[&[Arg::U64(out)][..], extra].concat(),
                &hidden,
                &mem,
            )
        });
        // Stop it only once it runs (its first iteration wrote `out`): a launch that has not
        // started yet would see the new epoch at entry and never run at all. The cap only keeps
        // a broken kernel from hanging the test.
        let started = std::time::Instant::now();
        while mem.arena_word(out).load(Ordering::SeqCst) == 0
            && started.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(after);
        mem.ctl_word(0).store(EPOCH + 1, Ordering::SeqCst);
        h.join()
            .unwrap()
            .unwrap_or_else(|f| panic!("{kernel}: {f}"));
    });
    mem.assert_victim_safe();
    let want = if fenced { TAG } else { 0 };
    assert_eq!(mem.ctl_word(FAULT).load(Ordering::SeqCst), want);
    let iterations = u32::from_le_bytes(mem.read(out, 4).try_into().unwrap());
    assert!(iterations > 0, "the kernel ran before the abort");
    let stopped = ptxvm::sandbox::CTL_STOPPED_TAG as usize;
    (
        mem.ctl_word(stopped).load(Ordering::SeqCst),
        mem.read(out, 16),
    )
}

#[test]
fn an_endless_loop_exits_when_the_epoch_changes() {
    abort_after("endless", Duration::from_millis(50), false);
}

/// A thread stopped at a guarded back-edge leaves the loop rather than exiting there (an `exit`
/// in that poll was miscompiled by NVIDIA's JIT: ptxvm's sandbox/poll.rs), and runs forward:
/// the store after the loop runs, and every later loop is left at its next back-edge.
#[test]
fn a_thread_stopped_at_a_guarded_back_edge_leaves_its_loops_and_runs_to_the_end() {
    let src = ptx(".visible .entry spin_then_mark(.param .u64 out)\n{\n\
         .reg .b64 %rd<2>;\n .reg .b32 %r<3>;\n .reg .pred %p;\n\
         ld.param.u64 %rd1, [out];\n mov.u32 %r1, 0;\n\
         FIRST:\n add.u32 %r1, %r1, 1;\n st.global.u32 [%rd1], %r1;\n\
         setp.ne.u32 %p, %r1, 0;\n @%p bra FIRST;\n\
         st.global.u32 [%rd1+4], 7;\n mov.u32 %r2, 0;\n\
         SECOND:\n add.u32 %r2, %r2, 1;\n st.global.u32 [%rd1+8], %r2;\n\
         setp.ne.u32 %p, %r2, 0;\n @%p bra SECOND;\n\
         st.global.u32 [%rd1+12], 9;\n ret;\n}\n");
    let (_, m) = load_sandboxed(&src);
    let out = abort_in_with(&m, "spin_then_mark", Duration::from_millis(20), false, &[]);
    let word = |i: usize| u32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!(word(1), 7, "the store after the first loop ran");
    assert!(word(2) >= 1, "the second loop was entered");
    assert_eq!(word(3), 9, "the second loop was left at its first poll");
}

/// A thread a poll stops stores its launch's tag in the stopped word, and in the fault word when
/// it noted a fenced access, wherever that poll is: at a guarded back-edge (its stop path falls
/// out of the loop), at an unguarded one (the kernel's stop block exits) and at a device
/// function's entry (the function's stop block, which reads the tag from its own copy of the
/// launch's parameter). The stop paths sit out of line (ptxvm's sandbox/report.rs).
#[test]
fn a_stopped_thread_names_its_launch_from_every_kind_of_poll() {
    let spin = |back: &str, fenced: &str| {
        ptx(&format!(
            ".visible .entry spin(.param .u64 out)\n{{\n .reg .b64 %rd<2>;\n\
             .reg .b32 %r<2>;\n .reg .pred %p;\n ld.param.u64 %rd1, [out];\n mov.u32 %r1, 0;\n\
             L:\n add.u32 %r1, %r1, 1;\n st.global.u32 [%rd1], %r1;\n{fenced}\
             setp.ne.u32 %p, %r1, 0;\n {back} bra L;\n ret;\n}}\n"
        ))
    };
    // An address outside every arena: its store is fenced, and noted.
    let fence = " mov.u64 %rd0, 8;\n st.global.u32 [%rd0], %r1;\n";
    let calls = ptx(
        ".func step(.param .u64 p)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n\
         ld.param.u64 %rd1, [p];\n ld.global.u32 %r1, [%rd1];\n add.u32 %r1, %r1, 1;\n\
         st.global.u32 [%rd1], %r1;\n ret;\n}\n\
         .visible .entry spin(.param .u64 out)\n{\n .reg .b64 %rd<2>;\n\
         ld.param.u64 %rd1, [out];\n\
         L:\n {\n .param .b64 a;\n st.param.b64 [a], %rd1;\n call.uni step, (a);\n }\n\
         bra L;\n ret;\n}\n",
    );
    for (what, src, fenced) in [
        ("guarded", spin("@%p", ""), false),
        ("guarded, fenced", spin("@%p", fence), true),
        ("unguarded", spin("", ""), false),
        ("unguarded, fenced", spin("", fence), true),
        ("at a callee's entry", calls, false),
    ] {
        let (_, m) = load_sandboxed(&src);
        let (stopped, _) = stopped_with(&m, "spin", Duration::from_millis(5), fenced, &[]);
        assert_eq!(stopped, TAG, "{what}: the stopped word names the launch");
    }
}

/// Counted loops one after another, none inside another loop, each short enough to run
/// poll-free: before session 28 the whole kernel ran unpolled (200 loops of 1,000 iterations
/// here; a 4 MiB module holds tens of thousands), so a stop waited for its end. Each loop is
/// now counted where it ends, and the thread stops within a loop or so of the new epoch.
#[test]
fn counted_loops_in_a_row_stop_when_the_epoch_changes() {
    let loops = 200;
    let mut body = String::new();
    for k in 0..loops {
        body.push_str(&format!(
            " mov.u32 %r1, 0;\nC{k}:\n add.u32 %r2, %r2, %r1;\n add.u32 %r1, %r1, 1;\n\
             setp.lt.u32 %p, %r1, 1000;\n @%p bra C{k};\n\
             add.u32 %r3, %r3, 1;\n st.global.u32 [%rd1], %r3;\n"
        ));
    }
    let src = ptx(&format!(
        ".visible .entry in_a_row(.param .u64 out)\n{{\n .reg .b64 %rd<2>;\n\
         .reg .b32 %r<4>;\n .reg .pred %p;\n ld.param.u64 %rd1, [out];\n\
         mov.u32 %r2, 0;\n mov.u32 %r3, 0;\n{body} st.global.u32 [%rd1+4], %r2;\n ret;\n}}\n"
    ));
    let (s, m) = load_sandboxed(&src);
    assert_eq!(
        crate::fastpath::charges(&s.ptx, "in_a_row"),
        loops,
        "each loop is counted where it ends"
    );
    let out = abort_in_with(&m, "in_a_row", Duration::from_millis(2), false, &[]);
    let done = u32::from_le_bytes(out[..4].try_into().unwrap());
    assert!(
        done < loops as u32 / 2,
        "{done} of {loops} loops ran after the stop was asked for"
    );
}

#[test]
fn a_launch_whose_epoch_is_already_stale_exits_at_entry() {
    let m = &fixture().2;
    let mut mem = GuestMem::new();
    let out = mem.alloc(16);
    mem.ctl_word(0).store(EPOCH + 1, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    run_sandboxed(
        m,
        "endless",
        Shape::linear(4, 64),
        &[Arg::U64(out)],
        &hidden,
        &mem,
    )
    .unwrap();
    assert_eq!(mem.read(out, 4), [0; 4], "no iteration ran");
}

#[test]
fn a_long_but_legal_loop_finishes_with_the_right_answer() {
    let n = 200_000u32;
    let mut out = 0;
    let mem = attack(
        "long",
        Shape::linear(1, 1),
        |m| {
            out = m.alloc(4);
            vec![Arg::U64(out), Arg::U32(n)]
        },
        false,
    );
    let want = (0..n).fold(0u32, |a, i| a.wrapping_add(i));
    assert_eq!(mem.read(out, 4), want.to_le_bytes());
}
