//! Red-team kernels against the sandbox, in hand-written PTX: each tries to read or write
//! memory outside its arena (or to run forever, or to use a refused instruction). In every case
//! the victim allocation is unchanged and never even translated, the attacker's output holds no
//! victim data, the control block's fault word names the launch, and no `Fault` comes back.

use std::sync::atomic::Ordering;
use std::time::Duration;

use std::sync::OnceLock;

use ptxvm::sandbox::{Policy, Sandboxed, sandbox};
use ptxvm::{Error, FaultKind, Launch, Module};

use crate::fastpath::output_in;
use crate::launch::launch;

use super::sandbox::{Arg, FAULT, GuestMem, Hidden, Shape, load_sandboxed, run_sandboxed};

const HEAD: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";
const TAG: u32 = 0x7a9;
const EPOCH: u32 = 3;

pub fn ptx(body: &str) -> String {
    format!("{HEAD}{body}")
}

/// The red-team module (tests/fixtures/redteam.ptx) as written, and rewritten and loaded.
fn fixture() -> &'static (String, Sandboxed, Module) {
    static F: OnceLock<(String, Sandboxed, Module)> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
        let text = std::fs::read_to_string(format!("{dir}/tests/fixtures/redteam.ptx"))
            .expect("tests/fixtures/redteam.ptx");
        let (s, m) = load_sandboxed(&text);
        (text, s, m)
    })
}

/// Runs red-team `kernel` with `args` (built from the memory), and checks the outcome.
fn attack(
    kernel: &str,
    shape: Shape,
    args: impl FnOnce(&mut GuestMem) -> Vec<Arg>,
    expect_fenced: bool,
) -> GuestMem {
    attack_in(&fixture().2, kernel, shape, args, expect_fenced)
}

/// `attack` on a kernel of another rewritten module.
pub fn attack_in(
    m: &Module,
    kernel: &str,
    shape: Shape,
    args: impl FnOnce(&mut GuestMem) -> Vec<Arg>,
    expect_fenced: bool,
) -> GuestMem {
    let mut mem = GuestMem::new();
    let args = args(&mut mem);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    run_sandboxed(m, kernel, shape, &args, &hidden, &mem)
        .unwrap_or_else(|f| panic!("{kernel}: the sandboxed kernel faulted: {f}"));
    mem.assert_victim_safe();
    let word = mem.ctl_word(FAULT).load(Ordering::SeqCst);
    if expect_fenced {
        assert_eq!(word, TAG, "{kernel}: the fault word names the launch");
    } else {
        assert_eq!(word, 0, "{kernel}: nothing was fenced");
    }
    mem
}

#[test]
fn pointer_plus_offset_reaches_no_other_allocation() {
    for sign in [1i64, -1] {
        attack(
            "offset_rw",
            Shape::linear(1, 64),
            |m| {
                let (buf, out) = (m.alloc(256), m.alloc(256));
                let delta = if sign > 0 {
                    m.victim().wrapping_sub(buf)
                } else {
                    // Below the arena: base - 64 KiB.
                    (m.base().wrapping_sub(65536)).wrapping_sub(buf)
                };
                vec![Arg::U64(buf), Arg::U64(delta), Arg::U64(out)]
            },
            true,
        );
    }
}

#[test]
fn scanning_past_the_arena_reads_only_the_arena() {
    // Starts 8 KiB below the victim and walks 64 KiB: the victim lies in the middle.
    attack(
        "scan",
        Shape::linear(1, 1),
        |m| {
            let out = m.alloc(8 * 128);
            vec![Arg::U64(m.victim() - 8192), Arg::U64(128), Arg::U64(out)]
        },
        true,
    );
}

#[test]
fn raw_addresses_in_u64_scalars_are_fenced() {
    for target in ["victim", "zero", "wild", "ctl"] {
        let mem = attack(
            "raw",
            Shape::linear(1, 1),
            |m| {
                let addr = match target {
                    "victim" => m.victim() + 64,
                    "zero" => 0,
                    "wild" => 0xdead_0000_0000,
                    _ => m.ctl(),
                };
                vec![Arg::U64(addr), Arg::U64(m.alloc(8))]
            },
            true,
        );
        assert_eq!(
            mem.ctl_word(0).load(Ordering::SeqCst),
            EPOCH,
            "{target}: ctl+0 kept"
        );
    }
}

#[test]
fn generic_pointers_into_global_shared_and_local_windows_are_fenced() {
    let mut out = 0;
    let mem = attack(
        "generic",
        Shape::linear(1, 1),
        |m| {
            out = m.alloc(16);
            vec![Arg::U64(m.victim()), Arg::U64(out)]
        },
        true,
    );
    assert_eq!(
        mem.read(out + 12, 4),
        7u32.to_le_bytes(),
        "in-window generic accesses work"
    );
}

#[test]
fn atomics_and_vector_accesses_are_fenced() {
    attack(
        "atoms",
        Shape::linear(1, 32),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(64))],
        true,
    );
}

#[test]
fn non_coherent_and_cache_hinted_loads_are_fenced() {
    attack(
        "nc",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(16))],
        true,
    );
}

#[test]
fn shared_memory_out_of_range_is_fenced() {
    attack(
        "shared_oob",
        Shape::linear(1, 64),
        |m| vec![Arg::U64(m.alloc(256)), Arg::U32(4096)],
        true,
    );
}

#[test]
fn local_memory_out_of_range_is_fenced() {
    let mut out = 0;
    let mem = attack(
        "local_oob",
        Shape::linear(1, 32),
        |m| {
            out = m.alloc(8);
            vec![Arg::U64(out), Arg::U64(1 << 20)]
        },
        true,
    );
    assert_eq!(
        mem.read(out + 4, 4),
        9u32.to_le_bytes(),
        "in-range locals work"
    );
}

#[test]
fn misaligned_accesses_are_aligned_down_not_faulted() {
    let mut buf = 0;
    let mem = attack(
        "misaligned",
        Shape::linear(1, 1),
        |m| {
            buf = m.alloc(32);
            m.write(buf + 4, &0x1234_5678u32.to_le_bytes());
            vec![Arg::U64(buf)]
        },
        false,
    );
    assert_eq!(
        mem.read(buf + 8, 4),
        0x1234_5678u32.to_le_bytes(),
        "read from buf+4"
    );
    assert_eq!(mem.read(buf + 16, 8), buf.to_le_bytes(), "wrote at buf+16");
}

fn refused(body: &str) -> (u32, String) {
    match sandbox(&ptx(body), &Policy::default()) {
        Err(Error::Refused { line, what }) => (line, what),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn trap_brkpt_recursion_indirect_calls_textures_surfaces_and_externs_are_refused() {
    let cases: &[(&str, u32, &str)] = &[
        (".visible .entry k() {\n trap;\n}", 5, "trap"),
        (".visible .entry k() {\n brkpt;\n}", 5, "brkpt"),
        (".visible .entry k() {\n pmevent 1;\n}", 5, "pmevent"),
        (
            ".func f() {\n call g;\n ret;\n}\n.func g() {\n call f;\n ret;\n}\n\
             .visible .entry k() {\n call f;\n}",
            9,
            "recursive",
        ),
        (
            ".func f() {\n call f;\n ret;\n}\n.visible .entry k() {\n call f;\n}",
            5,
            "recursive",
        ),
        (
            ".visible .entry k(.param .u64 p) {\n .reg .b64 %rd1;\n ld.param.u64 %rd1, [p];\n \
             call %rd1;\n}",
            7,
            "indirect",
        ),
        (
            ".extern .func ext(.param .b32 a);\n.visible .entry k() {\n ret;\n}",
            4,
            "not defined",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .f32 %f<5>;\n .reg .b32 %r<3>;\n \
             tex.2d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {%r1, %r2}];\n}",
            7,
            "texture",
        ),
        // Object handles in registers, the form ptxvm now runs unsandboxed: still refused.
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n \
             ld.param.u64 %rd1, [t];\n suld.b.2d.b32.trap {%r1}, [%rd1, {%r1, %r2}];\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n \
             ld.param.u64 %rd1, [t];\n sust.b.1d.b32.zero [%rd1, {%r1}], %r2;\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k(.param .u64 t) {\n .reg .b64 %rd1;\n .reg .f32 %f<5>;\n \
             ld.param.u64 %rd1, [t];\n tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f1, %f2}];\n}",
            8,
            "texture",
        ),
        (
            ".visible .entry k() {\n .reg .b32 %r1;\n mapa.u32 %r1, %r1, 0;\n}",
            6,
            "allow-list",
        ),
        (
            ".global .u32 a;\n.global .u64 p = a;\n.visible .entry k() { ret; }",
            5,
            "address",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n ld.param.u64 %rd1, [__gpuhost_sbx_ctl];\n}",
            6,
            "reserved",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n ld.shared::cluster.u32 %rd1, [%rd1];\n}",
            6,
            "shared::cluster",
        ),
        (
            ".visible .entry k() {\n .reg .b64 %rd1;\n \
             fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n}",
            6,
            "memory operand",
        ),
    ];
    for (src, line, word) in cases {
        let (l, what) = refused(src);
        assert_eq!(l, *line, "{src}: {what}");
        assert!(what.contains(word), "{src}: {what}");
    }
}

#[test]
fn barriers_that_can_leave_threads_waiting_are_refused_and_whole_block_barrier_zero_is_allowed() {
    // Two barrier ids, a thread count, `arrive` or a predicate can leave threads waiting
    // forever, where no poll runs; ptxvm faults such a launch, which on softcuda ends every
    // guest of the process.
    let k = |body: &str| {
        format!(".visible .entry k() {{\n .reg .b32 %r1;\n .reg .pred %p1;\n {body}\n ret;\n}}")
    };
    for body in [
        "bar.sync 1;",
        "bar.sync 0, 64;",
        "bar.sync %r1;",
        "barrier.sync 2;",
        "bar.arrive 0, 64;",
        "@%p1 bar.sync 0;",
        "bar.red.popc.u32 %r1, 1, %p1;",
        "bar.red.popc.u32 %r1, 0, 64, %p1;",
    ] {
        let (line, what) = refused(&k(body));
        assert_eq!(line, 7, "{body}: {what}");
        assert!(
            what.contains("barrier 0 for the whole block"),
            "{body}: {what}"
        );
    }
    for body in [
        "bar.sync 0;",
        "barrier.sync 0;",
        "bar.red.popc.u32 %r1, 0, %p1;",
        "bar.warp.sync -1;",
    ] {
        sandbox(&ptx(&k(body)), &Policy::default()).unwrap_or_else(|e| panic!("{body}: {e}"));
    }
}

/// Runs `kernel` on a thread, bumps the epoch after `after`, and expects a clean exit.
fn abort_after(kernel: &str, after: Duration, fenced: bool) {
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
    mem.read(out, 16)
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

/// A chain of `depth` device functions, each with its own local array, passing the attacker's
/// pointer down; the innermost writes through it (and 4 MiB past it).
fn chain(depth: usize) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        ".func (.param .b32 r) f{depth}(.param .b64 p, .param .b32 x)\n{{\n\
         .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n .local .align 4 .b8 d[8];\n\
         ld.param.u64 %rd1, [p];\n ld.param.u32 %r1, [x];\n st.local.u32 [d], %r1;\n\
         ld.local.u32 %r2, [d];\n st.global.u32 [%rd1], %r2;\n\
         st.global.u32 [%rd1+4194304], %r2;\n\
         st.param.b32 [r], %r2;\n ret;\n}}\n"
    ));
    for k in (1..depth).rev() {
        s.push_str(&format!(
            ".func (.param .b32 r) f{k}(.param .b64 p, .param .b32 x)\n{{\n\
             .reg .b64 %rd<4>;\n .reg .b32 %r<4>;\n .local .align 4 .b8 d[16];\n\
             ld.param.u64 %rd1, [p];\n ld.param.u32 %r1, [x];\n add.u32 %r1, %r1, 1;\n\
             st.local.u32 [d+12], %r1;\n ld.local.u32 %r1, [d+12];\n\
             {{\n .param .b64 a0;\n st.param.b64 [a0], %rd1;\n .param .b32 a1;\n\
             st.param.b32 [a1], %r1;\n .param .b32 r0;\n\
             call.uni (r0), f{next}, (a0, a1);\n ld.param.b32 %r2, [r0];\n }}\n\
             st.param.b32 [r], %r2;\n ret;\n}}\n",
            next = k + 1
        ));
    }
    s.push_str(
        ".visible .entry deep(.param .u64 out)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n\
         ld.param.u64 %rd1, [out];\n\
         { .param .b64 a0;\n st.param.b64 [a0], %rd1;\n .param .b32 a1;\n st.param.b32 [a1], 0;\n\
         .param .b32 r0;\n call.uni (r0), f1, (a0, a1);\n ld.param.b32 %r1, [r0];\n }\n\
         st.global.u32 [%rd1+8], %r1;\n ret;\n}\n",
    );
    s
}

#[test]
fn deep_call_chains_keep_fencing_and_count_their_locals() {
    let depth = 24;
    let src = ptx(&chain(depth));
    let (s, m) = load_sandboxed(&src);
    assert_eq!(
        s.kernels[0].local_bytes_per_thread,
        16 * (depth as u64 - 1) + 8,
        "local bytes along the deepest chain"
    );
    let mut out = 0;
    let mem = attack_in(
        &m,
        "deep",
        Shape::linear(1, 32),
        |m| {
            out = m.alloc(16);
            vec![Arg::U64(out)]
        },
        true,
    );
    let want = (depth as u32 - 1).to_le_bytes();
    assert_eq!(
        mem.read(out, 4),
        want,
        "the innermost call saw every increment"
    );
    assert_eq!(
        mem.read(out + 8, 4),
        want,
        "the result came back up the chain"
    );
}

#[test]
fn an_endless_loop_deep_in_a_call_chain_exits_when_the_epoch_changes() {
    abort_after("deep_spin", Duration::from_millis(50), true);
}

#[test]
fn oversized_globals_report_their_size_for_the_host_to_refuse_and_no_image_spans_them() {
    let kernel = ".visible .entry k(.param .u64 o) {\n .reg .b64 %rd<3>;\n\
                  mov.u64 %rd1, big;\n ld.param.u64 %rd2, [o];\n st.global.u64 [%rd2], %rd1;\n}";
    // The constant first: the initial image ends with it, and the host sees the block's size.
    let src = format!(
        ".const .b32 c[4] = {{1, 2, 3, 4}};\n.global .align 16 .b8 big[900000000];\n{kernel}"
    );
    let s = sandbox(&ptx(&src), &Policy::default()).unwrap();
    assert_eq!(s.globals.size, 900_000_016);
    assert_eq!(
        s.globals.init.len(),
        16,
        "the zero tail is not materialised"
    );
    assert!(Module::load(&s.ptx).is_ok());
    // The constant after 900 MB of zeros: its image would span them (host memory the size of
    // the gap, from a few hundred bytes of text), so it is refused, naming it.
    let src = format!(
        ".global .align 16 .b8 big[900000000];\n.const .b32 c[4] = {{1, 2, 3, 4}};\n{kernel}"
    );
    match sandbox(&ptx(&src), &Policy::default()) {
        Err(Error::Refused { what, .. }) => {
            assert!(
                what.contains("initialised variable c ends 900000016 bytes"),
                "{what}"
            )
        }
        other => panic!("{:?}", other.map(|s| s.globals.size)),
    }
}

#[test]
fn a_long_chain_of_dependent_registers_feeding_an_address_is_rewritten_on_a_host_call_sized_stack()
{
    // 20,000 adds, each reading the last, then a shared store at the chain's end: the bounds
    // analysis followed the chain one recursion per add and overflowed the stack, which aborts
    // the process. Rewritten on a 1 MiB stack: less than a host call has on wasmtime's async
    // fiber (2 MiB, less the guest's own 512 KiB), where a guest's module load runs.
    let n = 20_000;
    let mut body = format!(
        ".reg .b32 %r<{}>;\n.reg .b64 %rd<4>;\n.shared .align 4 .b8 sm[1024];\nmov.u32 %r0, 0;\n",
        n + 1
    );
    for i in 0..n {
        body += &format!("add.u32 %r{}, %r{i}, 1;\n", i + 1);
    }
    body += &format!(
        "cvt.u64.u32 %rd1, %r{n};\nmov.u64 %rd2, sm;\nadd.u64 %rd3, %rd2, %rd1;\n\
         st.shared.u8 [%rd3], 1;\nret;\n"
    );
    let src = ptx(&format!(".visible .entry k(.param .u64 o)\n{{\n{body}}}\n"));
    let rewritten = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let text = sandbox(&src, &Policy::default()).expect("rewritten").ptx;
            // softcuda loads it there too.
            let loaded = Module::load(&text).map(drop);
            (text, loaded)
        })
        .unwrap()
        .join()
        .expect("the rewrite and the load end");
    assert!(rewritten.0.contains("st.shared.u8"), "the store is kept");
    assert!(rewritten.1.is_ok(), "{:?}", rewritten.1);
}

#[test]
fn a_module_whose_rewrite_would_outgrow_the_output_limit_is_refused_before_it_is_put_together() {
    // A call chain: each function's prologue and call marshalling grow it about 20 times, the
    // shape that makes the most JIT input per byte of a guest's text.
    let mut src = String::new();
    for i in (0..200).rev() {
        let call = if i < 199 {
            format!(
                "{{ .param .b64 q; st.param.b64 [q], %rd1; call f{}, (q); }}\n",
                i + 1
            )
        } else {
            String::new()
        };
        src += &format!(
            ".func f{i}(.param .b64 p)\n{{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n\
             st.global.u32 [%rd1], 1;\n{call}ret;\n}}\n"
        );
    }
    src += ".visible .entry k(.param .u64 o)\n{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [o];\n\
            { .param .b64 q; st.param.b64 [q], %rd1; call f0, (q); }\nret;\n}\n";
    let src = ptx(&src);
    let out = sandbox(&src, &Policy::default())
        .expect("within the default limit")
        .ptx;
    assert!(out.len() > 10 * src.len(), "{} -> {}", src.len(), out.len());
    let small = Policy {
        max_output_bytes: out.len() / 2,
        ..Policy::default()
    };
    match sandbox(&src, &small) {
        Err(Error::Refused { what, .. }) => assert!(what.contains("split the module"), "{what}"),
        other => panic!("{:?}", other.map(|s| s.ptx.len())),
    }
}

#[test]
fn relocated_globals_and_constants_are_read_and_written_in_the_globals_block() {
    let (_, s, m) = fixture();
    assert_eq!(s.globals.size, 32);
    let mut mem = GuestMem::new();
    let out = mem.alloc(16);
    let g = mem.alloc(s.globals.size as usize);
    mem.write(g, &s.globals.init);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: g,
        epoch: EPOCH,
    };
    run_sandboxed(
        m,
        "globals_rw",
        Shape::linear(1, 4),
        &[Arg::U64(out)],
        &hidden,
        &mem,
    )
    .unwrap();
    assert_eq!(
        mem.read(g, 4),
        4u32.to_le_bytes(),
        "four atomic increments of counter"
    );
    let got: Vec<u8> = mem.read(out, 16);
    let want: Vec<u8> = [50u32, 60, 70, 80]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        mem.ctl_word(FAULT).load(Ordering::SeqCst),
        TAG,
        "counter+4 MiB (past the arena) was fenced"
    );
    mem.assert_victim_safe();
}

#[test]
fn the_watchdog_stops_an_unrewritten_endless_kernel() {
    let m = Module::load(&fixture().0).unwrap();
    let kernel = m.kernel_index("endless").unwrap();
    let mut mem = GuestMem::new();
    let out = mem.alloc(8);
    let globals: Vec<u64> = m.globals().iter().map(|_| mem.alloc(64)).collect();
    let params = out.to_le_bytes();
    let cancel = std::sync::atomic::AtomicBool::new(false);
    for by_flag in [false, true] {
        let l = Launch {
            grid: [2, 1, 1],
            block: [32, 1, 1],
            globals: &globals,
            cancel: by_flag.then_some(&cancel),
            deadline: (!by_flag).then(|| std::time::Instant::now() + Duration::from_millis(20)),
            ..launch(kernel, &params)
        };
        let r = std::thread::scope(|s| {
            let h = s.spawn(|| ptxvm::launch(&m, &l, &mem));
            if by_flag {
                std::thread::sleep(Duration::from_millis(20));
                cancel.store(true, Ordering::SeqCst);
            }
            h.join().unwrap()
        });
        let f = r.expect_err("the endless kernel was stopped");
        assert_eq!(f.kind, FaultKind::Timeout);
        assert!(f.to_string().contains("watchdog"), "{f}");
    }
}

#[test]
fn poll_interval_must_be_a_power_of_two_and_one_polls_every_back_edge() {
    for bad in [0, 3, 1000] {
        let r = sandbox(
            &fixture().0,
            &Policy {
                poll_interval: bad,
                ..Policy::default()
            },
        );
        assert!(matches!(r, Err(Error::Refused { line: 0, .. })), "{bad}");
    }
    let s = sandbox(
        &fixture().0,
        &Policy {
            poll_interval: 1,
            ..Policy::default()
        },
    )
    .unwrap();
    let m = Module::load(&s.ptx).unwrap();
    let (n, mut out) = (5000u32, 0);
    let mem = attack_in(
        &m,
        "long",
        Shape::linear(1, 32),
        |g| {
            out = g.alloc(4);
            vec![Arg::U64(out), Arg::U32(n)]
        },
        false,
    );
    let want = (0..n).fold(0u32, |a, i| a.wrapping_add(i));
    assert_eq!(mem.read(out, 4), want.to_le_bytes());
}

#[test]
fn runs_sharing_one_fence_work_in_range_and_are_fenced_as_a_whole() {
    // In range: the run's values come through.
    let mut out = 0;
    let mem = attack(
        "runs",
        Shape::linear(1, 1),
        |m| {
            let buf = m.alloc(32);
            let words: Vec<u8> = (0u32..8).flat_map(|v| (v * 11).to_le_bytes()).collect();
            m.write(buf, &words);
            out = m.alloc(16);
            vec![Arg::U64(buf), Arg::U64(out), Arg::U32(0)]
        },
        false,
    );
    let want: Vec<u8> = [0u32, 22, 44, 2]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(mem.read(out, 16), want);
    // The global run reaches the victim; then the shared run passes its variable's end.
    attack(
        "runs",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim() - 8), Arg::U64(m.alloc(16)), Arg::U32(0)],
        true,
    );
    attack(
        "runs",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.alloc(32)), Arg::U64(m.alloc(16)), Arg::U32(8)],
        true,
    );
}

#[test]
fn mangled_modules_are_rewritten_or_refused_never_a_panic() {
    // Deterministic mutations of the red-team module: truncations, deleted and duplicated
    // spans, swapped bytes, huge offsets. Every outcome is a value, and rewritten output loads.
    let base = fixture().0.as_bytes();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let mut outcomes = [0usize; 2];
    for round in 0..300 {
        let mut t = base.to_vec();
        let at = next(t.len());
        match round % 5 {
            0 => t.truncate(at),
            1 => {
                let n = next(200).min(t.len() - at);
                t.drain(at..at + n);
            }
            2 => {
                let n = next(200).min(t.len() - at);
                let span: Vec<u8> = t[at..at + n].to_vec();
                t.splice(at..at, span);
            }
            3 => {
                let b = next(t.len());
                t.swap(at, b);
            }
            _ => {
                let huge = b"+9223372036854775807";
                t.splice(at..at, huge.iter().copied());
            }
        }
        let Ok(text) = String::from_utf8(t) else {
            continue;
        };
        match sandbox(&text, &Policy::default()) {
            Ok(s) => {
                outcomes[0] += 1;
                // The original may be invalid for reasons the rewriter does not check (an
                // undeclared register); the rewrite must not add new reasons.
                if Module::load(&text).is_ok() {
                    Module::load(&s.ptx).unwrap_or_else(|e| panic!("round {round}: {e}"));
                }
            }
            Err(_) => outcomes[1] += 1,
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn legal_generic_accesses_in_every_window_give_the_original_results() {
    let (text, _, m) = fixture();
    let orig = Module::load(text).unwrap();
    let mut want = GuestMem::new();
    let out = want.alloc(1024);
    let k = orig.kernel_index("generic_mix").unwrap();
    let globals: Vec<u64> = orig.globals().iter().map(|_| want.alloc(64)).collect();
    let params = out.to_le_bytes();
    let l = Launch {
        block: [64, 1, 1],
        globals: &globals,
        ..launch(k, &params)
    };
    ptxvm::launch(&orig, &l, &want).unwrap();
    let expected: Vec<u8> = (0u32..64).flat_map(|t| (t * 7).to_le_bytes()).collect();
    assert_eq!(
        want.read(out, 256),
        expected,
        "the original kernel is right"
    );
    let mut got = 0;
    let mem = attack_in(
        m,
        "generic_mix",
        Shape::linear(1, 64),
        |g| {
            got = g.alloc(1024);
            vec![Arg::U64(got)]
        },
        false,
    );
    assert_eq!(mem.read(got, 512), want.read(out, 512));
}

#[test]
fn cp_async_copies_legally_and_is_fenced_on_both_ends() {
    let (mut src, mut out) = (0, 0);
    let mem = attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| {
            src = m.alloc(32);
            let bytes: Vec<u8> = (0u8..32).collect();
            m.write(src, &bytes);
            out = m.alloc(32);
            vec![Arg::U64(src), Arg::U64(out), Arg::U32(0)]
        },
        false,
    );
    assert_eq!(mem.read(out, 32), (0u8..32).collect::<Vec<u8>>());
    // From the victim; then into shared memory past the tile.
    attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(32)), Arg::U32(0)],
        true,
    );
    attack(
        "cp_async",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.alloc(32)), Arg::U64(m.alloc(32)), Arg::U32(64)],
        true,
    );
    for form in [
        "cp.async.bulk.shared::cluster.global [%r1], [%rd1], 16;",
        "cp.async.ca.shared.global [%r1], [%rd1], 16, %r2;",
        "cp.async.ca.shared.global [%r1], [%rd1], 12;",
    ] {
        let src = format!(
            ".visible .entry k(.param .u64 p) {{\n .reg .b64 %rd1;\n .reg .b32 %r<3>;\n {form}\n}}"
        );
        let (line, what) = refused(&src);
        assert_eq!(line, 7, "{form}");
        assert!(what.contains("cp.async"), "{what}");
    }
}

#[test]
fn a_load_that_replaces_its_own_base_does_not_share_its_fence() {
    let mut out = 0;
    let mem = attack(
        "chase",
        Shape::linear(1, 1),
        |m| {
            let (a, b) = (m.alloc(16), m.alloc(16));
            m.write(a, &b.to_le_bytes());
            m.write(b + 8, &0x1234_5678_9abc_def0u64.to_le_bytes());
            out = m.alloc(8);
            vec![Arg::U64(a), Arg::U64(out)]
        },
        false,
    );
    assert_eq!(mem.read(out, 8), 0x1234_5678_9abc_def0u64.to_le_bytes());
}

#[test]
fn a_jump_table_index_past_its_table_is_clamped_and_reported_not_a_wild_jump() {
    // Found by reading the allow-list after the generated programs (session 26): `brx.idx` past
    // its table is undefined on NVIDIA (a jump through whatever follows the table, past every
    // fence) and a fault on ptxvm, which on softcuda ended every guest of the process.
    let text = ptx(r#"
.visible .entry jump(.param .u64 out, .param .u32 i)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    .reg .pred %p;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [i];
    mov.u32 %r1, 7;
    setp.ne.u32 %p, %r0, 5;
$tab: .branchtargets $a, $b;
    @%p brx.idx %r0, $tab;
$a:
    mov.u32 %r1, 1;
    bra.uni $end;
$b:
    mov.u32 %r1, 2;
$end:
    st.global.u32 [%rd0], %r1;
    ret;
}
"#);
    let (_, m) = load_sandboxed(&text);
    // In range: the table's own targets, nothing reported. Past it: the last target, reported.
    // Index 5 is guarded off: no jump, nothing reported.
    for (i, want, fenced) in [
        (0u32, 1u32, false),
        (1, 2, false),
        (2, 2, true),
        (u32::MAX, 2, true),
        (5, 1, false),
    ] {
        let mut out = 0;
        let mem = attack_in(
            &m,
            "jump",
            Shape::linear(1, 32),
            |m| {
                out = m.alloc(4);
                vec![Arg::U64(out), Arg::U32(i)]
            },
            fenced,
        );
        assert_eq!(mem.read(out, 4), want.to_le_bytes(), "index {i}");
    }
    // A kernel whose jump table is its only fence still reports the clamp: the report is stored
    // at exit only by functions that noted one.
    let text = ptx(r#"
.visible .entry jump_only(.param .u32 i)
{
    .reg .b32 %r<2>;
    ld.param.u32 %r0, [i];
$tab: .branchtargets $a, $b;
    brx.idx %r0, $tab;
$a:
    ret;
$b:
    ret;
}
"#);
    let (_, m) = load_sandboxed(&text);
    for (i, fenced) in [(1u32, false), (9, true)] {
        attack_in(
            &m,
            "jump_only",
            Shape::linear(1, 32),
            |_| vec![Arg::U32(i)],
            fenced,
        );
    }
}

#[test]
fn a_jump_table_becomes_a_search_of_compares_that_takes_every_entry_and_polls_its_back_edges() {
    // NVIDIA's JIT ran two rewritten programs' `brx.idx` wrong at -O2 and above (sessions 28 and
    // 29), so the rewrite jumps with compares and branches instead. Five entries (an odd split),
    // one of them back to the loop's head: each index takes its own entry, the loop still polls
    // (an endless one stops), and past the table the last entry runs, reported.
    let text = ptx(r#"
.visible .entry jump5(.param .u64 out, .param .u32 i)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [i];
    mov.u32 %r1, 0;
$head:
    add.u32 %r1, %r1, 100;
    st.global.u32 [%rd0], %r1;
$tab: .branchtargets $a, $b, $c, $head, $e;
    brx.idx %r0, $tab;
$a:
    add.u32 %r1, %r1, 1;
    bra.uni $end;
$b:
    add.u32 %r1, %r1, 2;
    bra.uni $end;
$c:
    add.u32 %r1, %r1, 3;
    bra.uni $end;
$e:
    add.u32 %r1, %r1, 5;
$end:
    st.global.u32 [%rd0], %r1;
    ret;
}
"#);
    let (s, m) = load_sandboxed(&text);
    let k = super::fastpath::entry(&s.ptx, "jump5");
    assert!(!k.contains("brx"), "{k}");
    for (i, want, fenced) in [
        (0u32, 101u32, false),
        (1, 102, false),
        (2, 103, false),
        (4, 105, false),
        (5, 105, true),
        (u32::MAX, 105, true),
    ] {
        let got = output_in(&m, "jump5", Shape::linear(1, 32), 4, &[Arg::U32(i)], fenced);
        assert_eq!(got, want.to_le_bytes(), "index {i}");
    }
    // Index 3 jumps back to the head forever: the poll at that back-edge stops it.
    abort_in_with(
        &m,
        "jump5",
        Duration::from_millis(20),
        false,
        &[Arg::U32(3)],
    );
}
