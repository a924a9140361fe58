//! The sandbox's launch entry keeps its guarantees in its cheaper forms (issue #9's overhead
//! goals): a stale launch writes nothing although it compares the epoch late, unless it is a
//! loop-free kernel's launch that was told to skip the entry's read (a looping kernel, or one
//! that calls a loop, reads it anyway); a poll that finds the epoch unchanged leaves the control
//! block alone; with the arena check asked for, a misaligned arena base stops every launch at
//! entry, and by default that check is the host's.

use std::sync::atomic::Ordering;

use ptxvm::Module;

use super::fastpath::{EPOCH, TAG, polls};
use super::redteam::{attack_in, ptx};
use super::sandbox::{
    ARENA, Arg, FAULT, GuestMem, Hidden, Shape, load_sandboxed, load_sandboxed_with, run_sandboxed,
    run_sandboxed_flagged,
};

/// The entry's deferred epoch compare as the rewrite prints it (`Fx::entry_check`).
const COMPARE: &str = "setp.ne.u32 %__sbx_p, %__sbx_e, %__sbx_epoch;\n\t@%__sbx_p exit;";

const STRAIGHT: &str = "
.visible .entry straight(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.global.u32 %r2, [%rd1];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra OTHER;
    add.u32 %r3, %r2, 1;
    st.global.u32 [%rd2], %r3;
    ret;
OTHER:
    st.global.u32 [%rd2+4], %r2;
    ret;
}
";

/// Runs `kernel(in, out, n)`, with `in` holding 41 and `out` holding `before`, once while the
/// control block's epoch is not the launch's (stale) and once more while it is; returns `out`
/// after each run.
fn stale_then_current(m: &Module, kernel: &str, n: u32, before: &[u8]) -> (Vec<u8>, Vec<u8>) {
    stale_then_current_from(m, kernel, n, &41u32.to_le_bytes(), before)
}

/// [`stale_then_current`] with `in` holding `input`.
fn stale_then_current_from(
    m: &Module,
    kernel: &str,
    n: u32,
    input: &[u8],
    before: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let mut mem = GuestMem::new();
    let at = mem.alloc(input.len());
    mem.write(at, input);
    let out = mem.alloc(before.len());
    mem.write(out, before);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    let args = [Arg::U64(at), Arg::U64(out), Arg::U32(n)];
    mem.ctl_word(0).store(EPOCH + 1, Ordering::SeqCst);
    run_sandboxed(m, kernel, Shape::linear(1, 32), &args, &hidden, &mem).unwrap();
    let stale = mem.read(out, before.len());
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    run_sandboxed(m, kernel, Shape::linear(1, 32), &args, &hidden, &mem).unwrap();
    (stale, mem.read(out, before.len()))
}

#[test]
fn a_stale_launch_writes_nothing_on_any_path_though_it_compares_the_epoch_late() {
    let (_, m) = load_sandboxed(&ptx(STRAIGHT));
    for n in [0, 1] {
        let (stale, current) = stale_then_current(&m, "straight", n, &[0; 8]);
        assert_eq!(stale, [0; 8], "n = {n}");
        let want = if n == 0 {
            [0, 0, 0, 0, 41, 0, 0, 0]
        } else {
            [42, 0, 0, 0, 0, 0, 0, 0]
        };
        assert_eq!(current, want, "n = {n}");
    }
}

/// A guest memory with `in` (holding 41) and an 8-byte `out`, the control block at `ctl_epoch`,
/// and the arguments `(in, out, 1)` with hidden values for a launch under [`EPOCH`].
fn in_out(ctl_epoch: u32) -> (GuestMem, u64, [Arg; 3], Hidden) {
    let mut mem = GuestMem::new();
    let input = mem.alloc(4);
    mem.write(input, &41u32.to_le_bytes());
    let out = mem.alloc(8);
    mem.ctl_word(0).store(ctl_epoch, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    (
        mem,
        out,
        [Arg::U64(input), Arg::U64(out), Arg::U32(1)],
        hidden,
    )
}

#[test]
fn with_the_arena_check_an_arena_base_not_aligned_to_min_align_stops_every_launch_at_entry() {
    let policy = ptxvm::sandbox::Policy {
        check_arena_at_entry: true,
        ..Default::default()
    };
    let (_, m) = load_sandboxed_with(&ptx(STRAIGHT), &policy);
    let (mem, out, args, hidden) = in_out(EPOCH);
    let skew = ptxvm::sandbox::MIN_ALIGN / 2;
    let at = (mem.base() + skew, (1 << 20) - skew);
    run_sandboxed_flagged(
        &m,
        "straight",
        Shape::linear(1, 32),
        &args,
        &hidden,
        &mem,
        at,
        0,
    )
    .unwrap();
    assert_eq!(mem.read(out, 8), [0; 8]);
    assert_eq!(mem.ctl_word(FAULT).load(Ordering::SeqCst), TAG);
}

#[test]
fn by_default_kernels_leave_the_arena_check_to_the_host() {
    let (s, _) = load_sandboxed(&ptx(STRAIGHT));
    assert!(!s.ptx.contains("%__sbx_size, 65536"), "{}", s.ptx);
    let policy = ptxvm::sandbox::Policy {
        check_arena_at_entry: true,
        ..Default::default()
    };
    let (s, _) = load_sandboxed_with(&ptx(STRAIGHT), &policy);
    assert!(s.ptx.contains("%__sbx_size, 65536"), "{}", s.ptx);
}

/// Runs `kernel(in, out, 1)` once, the launch flagged to skip the entry's epoch read, with the
/// control block at `ctl_epoch`; returns the memory and `out`.
fn skipping_entry_read(m: &Module, kernel: &str, ctl_epoch: u32) -> (GuestMem, Vec<u8>) {
    let (mem, out, args, hidden) = in_out(ctl_epoch);
    let skip = ptxvm::sandbox::LAUNCH_SKIPS_ENTRY_READ;
    let at = (mem.base(), ARENA as u64);
    let shape = Shape::linear(1, 32);
    run_sandboxed_flagged(m, kernel, shape, &args, &hidden, &mem, at, skip).unwrap();
    let out = mem.read(out, 8);
    (mem, out)
}

/// [`skipping_entry_read`] under a stale epoch; returns `out`.
fn stale_skipping_entry_read(m: &Module, kernel: &str) -> Vec<u8> {
    skipping_entry_read(m, kernel, EPOCH + 1).1
}

#[test]
fn a_loop_free_kernels_launch_told_to_skip_the_entry_read_runs_its_straight_path_once() {
    let (s, m) = load_sandboxed(&ptx(STRAIGHT));
    assert!(s.kernels[0].loop_free);
    // Stale, yet it ran: the flag is the host's promise that this launch is small.
    assert_eq!(
        stale_skipping_entry_read(&m, "straight"),
        [42, 0, 0, 0, 0, 0, 0, 0]
    );
}

/// A loop-free kernel that writes 64 KiB past `out`, outside any arena these tests give.
const STRAY: &str = "
.visible .entry stray(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    ld.param.u64 %rd2, [out];
    add.u64 %rd2, %rd2, 16777216;
    st.global.u32 [%rd2], 9;
    ret;
}
";

#[test]
fn a_launch_that_skips_the_entry_read_still_reports_its_fenced_access_under_its_own_tag() {
    let (s, m) = load_sandboxed(&ptx(STRAY));
    assert!(s.kernels[0].loop_free);
    let (mem, _) = skipping_entry_read(&m, "stray", EPOCH);
    // The flag (bit 63 of `launch`) is no part of the tag (bits 32–47) the host names the
    // kernel by.
    assert_eq!(mem.ctl_word(FAULT).load(Ordering::SeqCst), TAG);
}

const LOOPED: &str = "
.func (.param .b32 r) count(.param .b32 n)
{
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
L:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra L;
    st.param.b32 [r], %r2;
    ret;
}

.visible .entry looped(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.global.u32 %r2, [%rd1];
    {
        .param .b32 a;
        .param .b32 r;
        st.param.b32 [a], %r1;
        call.uni (r), count, (a);
        ld.param.b32 %r3, [r];
    }
    add.u32 %r3, %r3, %r2;
    st.global.u32 [%rd2], %r3;
    ret;
}
";

#[test]
fn a_kernel_that_calls_a_loop_may_skip_the_entry_read_and_stops_at_its_callees_entry_poll() {
    let (s, m) = load_sandboxed(&ptx(LOOPED));
    let k = &s.kernels[0];
    assert!(!k.loop_free, "its callee loops");
    // The callee polls at its entry, so the kernel's own straight path is all it runs first.
    assert!(k.first_poll_span < 64, "{}", k.first_poll_span);
    assert_eq!(stale_skipping_entry_read(&m, "looped"), [0; 8]);
}

/// A kernel(in, out, n) that stores 1, 2, … 5000 to `out`, one store a loop iteration: too
/// many iterations to count, so its back-edge polls every 1,024.
const STORE_LOOP: &str = "
.visible .entry store_loop(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, 0;
L:
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd2], %r1;
    setp.lt.u32 %p1, %r1, 5000;
    @%p1 bra L;
    ret;
}
";

#[test]
fn a_looping_kernels_launch_told_to_skip_the_entry_read_runs_only_until_its_first_poll() {
    let (s, m) = load_sandboxed(&ptx(STORE_LOOP));
    let k = &s.kernels[0];
    assert!(!k.loop_free && k.first_poll_span <= ptxvm::sandbox::SKIP_ENTRY_READ_WORK);
    // Stale and told to skip: it stores until its first poll (1,024 back-edges), then stops.
    let out = stale_skipping_entry_read(&m, "store_loop");
    assert_eq!(out[..4], 1024u32.to_le_bytes(), "{out:?}");
    // Stale, not told to skip: the entry's read stops it before its first store.
    let (mem, out, args, hidden) = in_out(EPOCH + 1);
    run_sandboxed(&m, "store_loop", Shape::linear(1, 32), &args, &hidden, &mem).unwrap();
    assert_eq!(mem.read(out, 4), [0; 4]);
    // Told to skip with its epoch current: it runs to the end.
    assert_eq!(
        skipping_entry_read(&m, "store_loop", EPOCH).1[..4],
        5000u32.to_le_bytes()
    );
}

/// A kernel(in, out, n) whose loop (`n` times) makes `atomics` atomic adds to one word, then
/// stores.
fn atomics_loop(atomics: usize) -> String {
    let adds = "    atom.global.add.u32 %r1, [%rd2+4], 1;\n".repeat(atomics);
    ptx(&format!(
        ".visible .entry atomics(.param .u64 in, .param .u64 out, .param .u32 n)
{{
    .reg .b64 %rd<3>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r3, [n];
    ld.global.u32 %r2, [%rd1];
L:
{adds}    sub.u32 %r3, %r3, 1;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra L;
    st.global.u32 [%rd2], %r2;
    ret;
}}
"
    ))
}

#[test]
fn a_kernel_whose_work_before_its_first_poll_is_past_the_skip_work_reads_the_epoch_at_entry() {
    // Each atomic counts 32 (a warp on one address), and a thread may take 1,024 back-edges
    // before it polls: 10 atomics a loop stay far within SKIP_ENTRY_READ_WORK (2^28), 10,000
    // do not, so that kernel reads the epoch whatever its launch says.
    let (s, _) = load_sandboxed(&atomics_loop(10));
    assert!(s.kernels[0].first_poll_span <= ptxvm::sandbox::SKIP_ENTRY_READ_WORK);
    let (s, m) = load_sandboxed(&atomics_loop(10_000));
    assert_eq!(
        s.kernels[0].first_poll_span,
        u64::MAX,
        "too long to run after a stop"
    );
    assert_eq!(stale_skipping_entry_read(&m, "atomics"), [0; 8]);
}

const SHARED_THEN_POLLED: &str = "
.visible .entry shared_then_polled(.param .u64 out)
{
    .shared .align 4 .b32 s[32];
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, s;
    add.u32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r1;
    mov.u32 %r1, 0;
L:
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 5000;
    @%p1 bra L;
    ld.param.u64 %rd1, [out];
    st.global.u32 [%rd1], %r1;
    ret;
}
";

#[test]
fn a_poll_that_finds_the_epoch_unchanged_writes_nothing_to_the_control_block() {
    // The shared access leaves the sandbox's predicate register true; the loop is too long to
    // count, so it polls. A poll whose epoch still matches must not store the stopped-kernel
    // word (a predicated compare once left that predicate as it was, and the store followed).
    let (s, m) = load_sandboxed(&ptx(SHARED_THEN_POLLED));
    assert_eq!(polls(&s.ptx, "shared_then_polled"), 1, "{}", s.ptx);
    let mut out = 0;
    let mem = attack_in(
        &m,
        "shared_then_polled",
        Shape::linear(1, 32),
        |g| {
            out = g.alloc(4);
            vec![Arg::U64(out)]
        },
        false,
    );
    assert_eq!(mem.read(out, 4), 5000u32.to_le_bytes());
    let stopped = ptxvm::sandbox::CTL_STOPPED_TAG as usize;
    assert_eq!(mem.ctl_word(stopped).load(Ordering::SeqCst), 0);
}

const LOAD_LOOP_THEN_STORE: &str = "
.visible .entry load_loop(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<5>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
LOOP:
    ld.global.u32 %r4, [%rd1];
    add.u32 %r3, %r3, %r4;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p2, %r2, %r1;
    @%p2 bra LOOP;
DONE:
    st.global.u32 [%rd2], %r3;
    ret;
}
";

#[test]
fn the_entry_compare_waits_past_a_loop_of_loads_and_still_guards_every_write() {
    let (s, m) = load_sandboxed(&ptx(LOAD_LOOP_THEN_STORE));
    // The compare of the prologue's epoch is placed after the loop (the skip branch and the
    // back-edge are reached unchecked), right before the store.
    let compare = COMPARE;
    let (before, after) = s.ptx.split_once("DONE:").expect("the label survives");
    assert!(after.trim_start().starts_with(compare), "{}", s.ptx);
    let (prologue, _) = before.split_once("LOOP:").expect("the label survives");
    assert!(!prologue.contains(compare), "{}", s.ptx);
    for n in [0u32, 3] {
        let (stale, current) = stale_then_current(&m, "load_loop", n, &7u32.to_le_bytes());
        assert_eq!(stale, 7u32.to_le_bytes(), "stale launch, n = {n}");
        assert_eq!(current, (41 * n).to_le_bytes(), "n = {n}");
    }
}

/// A k-loop of tensor-core loads and products (as nvcc writes wmma GEMMs), then the tile's
/// store: `n` trips of an all-ones 16×16 f16 tile times itself, so every output is 16n.
const WMMA_LOOP_THEN_STORE: &str = "
.visible .entry wmma_loop(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %a<8>;
    .reg .b32 %b<8>;
    .reg .f32 %d<8>;
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.f32 %d0, 0f00000000; mov.f32 %d1, 0f00000000; mov.f32 %d2, 0f00000000;
    mov.f32 %d3, 0f00000000; mov.f32 %d4, 0f00000000; mov.f32 %d5, 0f00000000;
    mov.f32 %d6, 0f00000000; mov.f32 %d7, 0f00000000;
    mov.u32 %r2, 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
LOOP:
    wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, [%rd1], 16;
    wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7}, [%rd1], 16;
    wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7}, {%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}, {%b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7}, {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7};
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra LOOP;
DONE:
    wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd2], {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7}, 16;
    ret;
}
";

#[test]
fn the_entry_compare_waits_past_a_loop_of_tensor_core_loads_and_still_guards_the_tile_store() {
    let (s, m) = load_sandboxed(&ptx(WMMA_LOOP_THEN_STORE));
    // Not once per trip: the loop's loads and products leave nothing behind, so the compare
    // goes after it, before the store (session 39; it used to sit at the loop's head).
    let compare = COMPARE;
    let (before, after) = s.ptx.split_once("DONE:").expect("the label survives");
    assert!(after.trim_start().starts_with(compare), "{}", s.ptx);
    assert!(!before.contains(compare), "{}", s.ptx);
    let ones: Vec<u8> = [0x00, 0x3c].repeat(256);
    for n in [0u32, 3] {
        let (stale, current) = stale_then_current_from(&m, "wmma_loop", n, &ones, &[7; 1024]);
        assert_eq!(stale, [7; 1024], "a stale launch writes nothing, n = {n}");
        assert_eq!(
            current,
            (16.0f32 * n as f32).to_le_bytes().repeat(256),
            "n = {n}"
        );
    }
}

/// A store on every trip of a loop, as softmax_rows' second and third loops: `out[c] = in[0] +
/// 1 + c / 32` for `c = tid; c < n; c += ntid` (versioned: its step is a register), or for
/// `c = tid; c < 96; c += 32` with `n` unused (bounded: polled nowhere).
fn store_loop(step: &str, bound: &str) -> String {
    ptx(&format!(
        ".visible .entry store_loop(.param .u64 in, .param .u64 out, .param .u32 n)
{{
    .reg .b64 %rd<5>;
    .reg .b32 %r<5>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.global.u32 %r4, [%rd1];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, {bound};
    @%p1 bra DONE;
    mov.u32 %r3, %ntid.x;
LOOP:
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    add.u32 %r4, %r4, 1;
    st.global.u32 [%rd4], %r4;
    add.u32 %r2, %r2, {step};
    setp.lt.u32 %p1, %r2, {bound};
    @%p1 bra LOOP;
DONE:
    ret;
}}
"
    ))
}

#[test]
fn a_loop_that_stores_on_every_trip_compares_the_epoch_before_it_not_on_each_trip() {
    let compare = &format!("{COMPARE}\n");
    // The loop the compare would sit in: the versioned loop's fast copy, or the bounded loop.
    for (step, bound, head, back) in [
        ("%r3", "%r1", "$gpuhost_v1_f:", "bra $gpuhost_v1_f;"),
        ("32", "96", "LOOP:", "bra LOOP;"),
    ] {
        let (s, m) = load_sandboxed(&store_loop(step, bound));
        let (before, rest) = s.ptx.split_once(head).expect("the loop's header");
        let (body, _) = rest.split_once(back).expect("the loop's back-edge");
        assert!(
            before.ends_with(compare),
            "{step}: right before the loop\n{}",
            s.ptx
        );
        assert!(
            !body.contains(compare),
            "{step}: not in the loop\n{}",
            s.ptx
        );
        for n in [0u32, 96] {
            let (stale, current) = stale_then_current(&m, "store_loop", n, &[7; 384]);
            assert_eq!(
                stale, [7; 384],
                "a stale launch writes nothing: {step}, n = {n}"
            );
            let written = if bound == "96" { 96 } else { n as usize };
            let want: Vec<u8> = (0..96u32)
                .flat_map(|c| match (c as usize) < written {
                    true => (42 + c / 32).to_le_bytes(),
                    false => [7; 4],
                })
                .collect();
            assert_eq!(current, want, "{step}, n = {n}");
        }
    }
}

/// Block-private work before the only global store: a shared store, a barrier, a shared load
/// and a shuffle.
const PRIVATE_THEN_STORE: &str = "
.visible .entry private_work(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<6>;
    .shared .align 4 .b32 tile[32];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    ld.global.u32 %r2, [%rd1];
    st.shared.u32 [tile], %r2;
    bar.sync 0;
    ld.shared.u32 %r3, [tile];
    shfl.sync.idx.b32 %r4, %r3, 0, 31, -1;
    add.u32 %r5, %r4, %r1;
    st.global.u32 [%rd2], %r5;
    ret;
}
";

#[test]
fn block_private_stores_barriers_and_shuffles_run_before_the_entry_compare_and_a_stale_launch_still_writes_nothing()
 {
    // The deferred compare, as looping kernels get it: this loop-free kernel gets it with
    // `early_loop_free_check` off (by default it compares at entry; see the next test).
    let policy = ptxvm::sandbox::Policy {
        early_loop_free_check: false,
        ..Default::default()
    };
    let (s, m) = load_sandboxed_with(&ptx(PRIVATE_THEN_STORE), &policy);
    // The compare waits until the store to global memory: the shared store, the barrier and
    // the shuffle come before it, so the epoch load overlaps them.
    let compare = COMPARE;
    let (before, after) = s.ptx.split_once(compare).expect("one compare");
    assert!(before.contains("bar.sync 0;"), "{}", s.ptx);
    assert!(before.contains("shfl.sync.idx.b32"), "{}", s.ptx);
    assert!(after.contains("st.global.u32"), "{}", s.ptx);
    for n in [0u32, 5] {
        let (stale, current) = stale_then_current(&m, "private_work", n, &7u32.to_le_bytes());
        assert_eq!(
            stale,
            7u32.to_le_bytes(),
            "a stale launch writes nothing, n = {n}"
        );
        assert_eq!(current, (41 + n).to_le_bytes(), "n = {n}");
    }
}

#[test]
fn a_loop_free_kernel_compares_the_epoch_at_entry_behind_one_uniform_skip_branch() {
    let (s, m) = load_sandboxed(&ptx(PRIVATE_THEN_STORE));
    let skip = "@%__sbx_q bra.uni $__sbx_L";
    let compare = COMPARE;
    let (before, after) = s.ptx.split_once(compare).expect("one compare");
    assert!(
        before.contains(skip) && !before.contains("st.shared"),
        "{}",
        s.ptx
    );
    assert!(after.contains("bar.sync 0;"), "{}", s.ptx);
    // Without the skip flag it still stops a stale launch, and runs a current one.
    for n in [0u32, 5] {
        let (stale, current) = stale_then_current(&m, "private_work", n, &7u32.to_le_bytes());
        assert_eq!(stale, 7u32.to_le_bytes(), "n = {n}");
        assert_eq!(current, (41 + n).to_le_bytes(), "n = {n}");
    }
}

#[test]
fn a_skip_copy_has_no_entry_read_and_a_stale_launch_of_it_stops_at_its_first_poll() {
    let (s, m) = load_sandboxed(&ptx(STORE_LOOP));
    let copy = s.kernels[0]
        .skip_copy
        .clone()
        .expect("a kernel that may skip has a copy");
    assert_eq!(
        copy,
        format!("store_loop{}", ptxvm::sandbox::SKIP_COPY_SUFFIX)
    );
    assert_eq!(s.kernels.len(), 1, "the copy is no kernel of its own");
    let text = &s.ptx[s.ptx.find(&format!(".entry {copy}(")).unwrap()..];
    // Its only epoch read is the loop's poll, and nothing compares before the first store.
    assert_eq!(polls(&s.ptx, &copy), 1, "{text}");
    assert_eq!(text.matches("[%__sbx_ctl];").count(), 1, "{text}");
    // Stale: it stores until its first poll, as a skipping launch of the kernel does.
    let (mem, out, args, hidden) = in_out(EPOCH + 1);
    run_sandboxed(&m, &copy, Shape::linear(1, 32), &args, &hidden, &mem).unwrap();
    assert_eq!(mem.read(out, 4), 1024u32.to_le_bytes());
}

#[test]
fn a_kernel_that_may_never_skip_gets_no_copy_and_a_taken_name_is_not_reused() {
    let (s, _) = load_sandboxed(&atomics_loop(10_000));
    assert_eq!(s.kernels[0].skip_copy, None);
    let taken = STORE_LOOP.to_string()
        + &STORE_LOOP.replace(
            "store_loop(",
            &format!("store_loop{}(", ptxvm::sandbox::SKIP_COPY_SUFFIX),
        );
    let (s, _) = load_sandboxed(&ptx(&taken));
    assert_eq!(
        s.kernels[0].skip_copy, None,
        "the user's kernel keeps its name"
    );
}

/// [`STORE_LOOP`] with a branch, first, into a `{ }` block at a label followed only by a hint
/// (which the rewrite drops): the kernel's deferred compare is the block's last statement.
fn into_block() -> String {
    let block = "    setp.eq.u32 %p1, %r1, 0;\n    @%p1 bra IN;\n    {\n    add.u32 %r1, %r1, 1;\n\
                 IN:\n    prefetch.global.L1 [%rd2];\n    }\nL:";
    STORE_LOOP.replacen("L:", block, 1)
}

#[test]
fn a_skip_copy_shares_its_kernels_body_but_not_the_compares_deferred_into_it() {
    let (s, _) = load_sandboxed(&ptx(&into_block()));
    let copy = s.kernels[0].skip_copy.clone().expect("a copy");
    let (kernel, copy) = s.ptx.split_once(&format!(".entry {copy}(")).unwrap();
    let compare = COMPARE;
    assert!(
        kernel.contains(&format!("IN:\n\t{compare}\n\t}}")),
        "{kernel}"
    );
    // Without the compare the copy's block would end in the label: it gets a filler instead.
    assert!(!copy.contains(compare), "{copy}");
    assert!(
        copy.contains("IN:\n\tmov.u32 %__sbx_t, %__sbx_t;\n\t}"),
        "{copy}"
    );
}

/// What counter `counter` of the control block holds (`ptxvm::sandbox::CTL_STARTED`).
fn started(mem: &GuestMem, counter: u32) -> u32 {
    let at = ptxvm::sandbox::CTL_STARTED as usize + 4 * counter as usize;
    mem.ctl_word(at).load(Ordering::SeqCst)
}

/// What counter `counter`'s time word holds (`ptxvm::sandbox::CTL_STARTED_AT`).
fn started_at(mem: &GuestMem, counter: u32) -> u64 {
    let at = ptxvm::sandbox::CTL_STARTED_AT as usize + 8 * counter as usize;
    let (lo, hi) = (mem.ctl_word(at), mem.ctl_word(at + 4));
    u64::from(lo.load(Ordering::SeqCst)) | u64::from(hi.load(Ordering::SeqCst)) << 32
}

#[test]
fn every_launch_counts_its_start_once_in_its_own_counter_stopped_skipping_or_not() {
    let skip = ptxvm::sandbox::LAUNCH_SKIPS_ENTRY_READ;
    let shapes = [
        Shape::linear(1, 32),
        Shape {
            grid: [2, 3, 2],
            block: [4, 2, 3],
            dyn_shared: 0,
        },
    ];
    for (src, kernel) in [(STRAIGHT, "straight"), (LOOPED, "looped")] {
        let (_, m) = load_sandboxed(&ptx(src));
        // Current and stale epochs, with and without the skip, in counters 0, 7 and the last.
        let counters = [0, 7, ptxvm::sandbox::START_COUNTERS - 1];
        for (ctl_epoch, flags, counter) in [
            (EPOCH, 0, 7),
            (EPOCH + 1, 0, 0),
            (EPOCH, skip, counters[2]),
            (EPOCH + 1, skip, 7),
        ] {
            for shape in shapes {
                let (mem, _, args, hidden) = in_out(ctl_epoch);
                let at = (mem.base(), ARENA as u64);
                let flags = flags | u64::from(counter) << 48;
                let mut times = [0; 2];
                for t in &mut times {
                    run_sandboxed_flagged(&m, kernel, shape, &args, &hidden, &mem, at, flags)
                        .unwrap();
                    *t = started_at(&mem, counter);
                }
                let case =
                    format!("{kernel} {shape:?}, control epoch {ctl_epoch}, flags {flags:#x}");
                let per_launch = ptxvm::sandbox::launch_starts(shape.grid, shape.block);
                for c in counters {
                    let want = if c == counter { 2 * per_launch } else { 0 };
                    assert_eq!(started(&mem, c), want, "{case}: counter {c}");
                    if c != counter {
                        assert_eq!(started_at(&mem, c), 0, "{case}: time word {c}");
                    }
                }
                // Each launch leaves a new time: the host tells a launch began by the change.
                assert!(
                    0 < times[0] && times[0] < times[1],
                    "{case}: times {times:?}"
                );
                // The counter's bits are no part of the tag a report names the kernel by.
                let fault = mem.ctl_word(FAULT).load(Ordering::SeqCst);
                assert!(fault == 0 || fault == TAG, "fault word {fault:#x}");
            }
        }
    }
}

#[test]
fn a_launch_counts_one_start_per_thread_at_x_zero_of_each_block_at_x_zero() {
    use ptxvm::sandbox::launch_starts;
    assert_eq!(launch_starts([1000, 1, 1], [256, 1, 1]), 1);
    assert_eq!(launch_starts([2, 3, 2], [4, 2, 3]), 36);
    // As the counter does, modulo 2^32.
    assert_eq!(launch_starts([1, 65536, 65536], [1, 2, 1]), 0);
}

#[test]
fn the_launch_value_puts_each_field_in_its_bits() {
    use ptxvm::sandbox::{LAUNCH_SKIPS_ENTRY_READ, MAX_TAG, START_COUNTERS, launch_value};
    let v = launch_value(0xdead_beef, 0x7a9, 5, LAUNCH_SKIPS_ENTRY_READ);
    assert_eq!(
        v,
        0xdead_beef | 0x7a9 << 32 | 5 << 48 | LAUNCH_SKIPS_ENTRY_READ
    );
    // Fields out of range are cut to their bits, never spilling into a neighbour.
    let v = launch_value(0, MAX_TAG + 2, START_COUNTERS + 3, u64::MAX);
    assert_eq!(v, 1 << 32 | 3 << 48 | LAUNCH_SKIPS_ENTRY_READ);
}
