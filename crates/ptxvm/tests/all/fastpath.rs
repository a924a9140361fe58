//! The sandbox's cheaper forms keep every guarantee (issue #9's overhead goals): counted loops
//! run without polls but anything that only looks counted still polls and still stops; local
//! accesses through registers that can only point into a local array run unchecked, and every
//! other local access keeps its check; 32-bit window checks fence below, above and across the
//! window; fenced accesses are reported at exit, also by a thread stopped in a loop. The launch's
//! entry (epoch compare, its skip, the arena check) is entry.rs's.

use std::time::Duration;

use ptxvm::Module;

use super::redteam::{abort_in, attack_in, ptx};
use super::sandbox::{Arg, Shape, load_sandboxed};

pub const TAG: u32 = 0x7a9;
pub const EPOCH: u32 = 3;

const LOOPS: &str = "
.func (.param .b32 r) fenced_helper(.param .b64 p)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    st.global.u32 [%rd1], 1;
    st.param.b32 [r], 1;
    ret;
}

.visible .entry counted(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    mov.u32 %r2, 0;
L:
    add.u32 %r2, %r2, %r1;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 1000;
    @%p1 bra L;
    st.global.u32 [%rd1], %r2;
    ret;
}

.visible .entry twice_written(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
L:
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd1], %r3;
    setp.eq.u32 %p2, %r1, 500;
    @%p2 mov.u32 %r1, 0;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 1000;
    @%p1 bra L;
    ret;
}

.visible .entry side_entry(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
    bra.uni M;
L:
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd1], %r3;
M:
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 1000;
    @%p1 bra L;
    mov.u32 %r1, 0;
    bra.uni M;
}

.visible .entry outer_inner(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r3, 0;
O:
    mov.u32 %r1, 0;
L:
    add.u32 %r3, %r3, 1;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 1000;
    @%p1 bra L;
    st.global.u32 [%rd1], %r3;
    bra.uni O;
}

.visible .entry step_zero(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
L:
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd1], %r3;
    add.u32 %r1, %r1, 0;
    setp.lt.u32 %p1, %r1, 1000;
    @%p1 bra L;
    ret;
}

.visible .entry or_combined(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
    setp.eq.u32 %p2, %r3, %r3;
L:
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd1], %r3;
    add.u32 %r1, %r1, 1;
    setp.lt.or.u32 %p1, %r1, 1000, %p2;
    @%p1 bra L;
    ret;
}

.visible .entry fenced_then_endless(.param .u64 out)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    add.u64 %rd2, %rd1, 1073741824;
    st.global.u32 [%rd2], 7;
    mov.u32 %r1, 0;
SPIN:
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd1], %r1;
    bra.uni SPIN;
}

.visible .entry signed_bound(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
L:
    add.s32 %r1, %r1, 1;
    setp.lt.s32 %p1, %r1, 1000;
    @%p1 bra L;
    st.global.u32 [%rd1], %r1;
    ret;
}

.visible .entry too_long(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
L:
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 5000;
    @%p1 bra L;
    st.global.u32 [%rd1], %r1;
    ret;
}

.visible .entry calls_fencing(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
L:
    {
    .param .b64 a0;
    st.param.b64 [a0], %rd1;
    .param .b32 r0;
    call.uni (r0), fenced_helper, (a0);
    ld.param.b32 %r2, [r0];
    }
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 100;
    @%p1 bra L;
    ret;
}
";

/// The rewritten text of entry `name`.
pub fn entry<'a>(text: &'a str, name: &str) -> &'a str {
    let at = text
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("{name} in\n{text}"));
    let rest = &text[at..];
    &rest[..rest.find("\n}\n").map_or(rest.len(), |e| e + 3)]
}

/// `output` of `n` words, given the `u32` offset argument.
fn words_of(m: &Module, kernel: &str, n: usize, off: u32, fenced: bool) -> Vec<u32> {
    output(m, kernel, 4 * n, &[Arg::U32(off)], fenced)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs `kernel` (one block of 32) with an output buffer of `bytes` first and then `extra`,
/// checks the attack outcome (`attack_in`), and gives the output.
fn output(m: &Module, kernel: &str, bytes: usize, extra: &[Arg], fenced: bool) -> Vec<u8> {
    output_in(m, kernel, Shape::linear(1, 32), bytes, extra, fenced)
}

/// `output` with the launch geometry given.
pub fn output_in(
    m: &Module,
    kernel: &str,
    shape: Shape,
    bytes: usize,
    extra: &[Arg],
    fenced: bool,
) -> Vec<u8> {
    let mut out = 0;
    let mem = attack_in(
        m,
        kernel,
        shape,
        |g| {
            out = g.alloc(bytes);
            [&[Arg::U64(out)], extra].concat()
        },
        fenced,
    );
    mem.read(out, bytes)
}

/// Countdowns in entry `name`: (at back-edges and calls, where a bounded loop ends). A bounded
/// loop no loop encloses is counted right after its back-edge branch (bounded.rs, `charge`).
fn countdowns(text: &str, name: &str) -> (usize, usize) {
    let e = entry(text, name);
    let lines: Vec<&str> = e.lines().map(str::trim).collect();
    let at_end = |k: usize| k > 0 && lines[k - 1].contains("bra ");
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("sub.s32 %__sbx_cnt"))
        .fold(
            (0, 0),
            |(p, c), (k, _)| {
                if at_end(k) { (p, c + 1) } else { (p + 1, c) }
            },
        )
}

/// Back-edge countdowns (polls) in entry `name`.
pub fn polls(text: &str, name: &str) -> usize {
    countdowns(text, name).0
}

/// Countdowns where a bounded loop no loop encloses ends, in entry `name`.
pub fn charges(text: &str, name: &str) -> usize {
    countdowns(text, name).1
}

#[test]
fn a_counted_loop_runs_without_polls_and_gives_the_right_answer() {
    let (s, m) = load_sandboxed(&ptx(LOOPS));
    assert_eq!(polls(&s.ptx, "counted"), 0, "{}", entry(&s.ptx, "counted"));
    // Alone at the top of its function, it stays within what may go uncounted (bounded.rs).
    assert_eq!(charges(&s.ptx, "counted"), 0, "counted where it ends");
    let got = output(&m, "counted", 4, &[], false);
    assert_eq!(got, (0..1000u32).sum::<u32>().to_le_bytes());
}

/// A counted loop of 10 iterations whose body adds 1 to its sum `adds` times.
fn counted_with_body(adds: usize) -> String {
    let body = "    add.u32 %r2, %r2, 1;\n".repeat(adds);
    ptx(&format!(
        ".visible .entry long_body(.param .u64 out)\n{{\n    .reg .b64 %rd<2>;\n\
         .reg .b32 %r<4>;\n    .reg .pred %p<2>;\n    ld.param.u64 %rd1, [out];\n\
         mov.u32 %r1, 0;\n    mov.u32 %r2, 0;\nL:\n{body}    add.u32 %r1, %r1, 1;\n\
         setp.lt.u32 %p1, %r1, 10;\n    @%p1 bra L;\n    st.global.u32 [%rd1], %r2;\n    ret;\n}}\n"
    ))
}

#[test]
fn a_counted_loop_longer_than_the_proof_walks_is_polled_and_still_right() {
    // The proof that a loop is counted walks its body; past ~1,000 statements it is not tried
    // (bounded.rs, MAX_COUNTED_SPAN), which keeps a body of thousands of nested loops linear to
    // rewrite. Such a loop polls like an unbounded one, and computes the same.
    for (adds, polled) in [(100, 0), (2000, 1)] {
        let (s, m) = load_sandboxed(&counted_with_body(adds));
        assert_eq!(polls(&s.ptx, "long_body"), polled, "{adds} adds");
        let got = output(&m, "long_body", 4, &[], false);
        assert_eq!(got, (10 * adds as u32).to_le_bytes(), "{adds} adds");
    }
}

#[test]
fn loops_that_only_look_counted_still_poll() {
    let (s, _) = load_sandboxed(&ptx(LOOPS));
    // Every back-edge polls: side_entry's inner loop is entered in its middle (its counter
    // could be reset from outside), so it polls as well as the outer one.
    for (k, n) in [
        ("twice_written", 1),
        ("side_entry", 2),
        ("step_zero", 1),
        ("or_combined", 1),
        ("signed_bound", 1),
        ("too_long", 1),
        ("calls_fencing", 1),
    ] {
        assert_eq!(polls(&s.ptx, k), n, "{k}:\n{}", entry(&s.ptx, k));
    }
}

#[test]
fn an_endless_loop_around_a_counted_one_counts_the_inner_iterations_and_stops() {
    let (s, m) = load_sandboxed(&ptx(LOOPS));
    // The inner loop runs at most 1000 / 1 + 2 times per outer iteration: the outer back-edge
    // counts that many more.
    assert!(
        entry(&s.ptx, "outer_inner").contains("sub.s32 %__sbx_cnt, %__sbx_cnt, 1003;"),
        "{}",
        entry(&s.ptx, "outer_inner")
    );
    abort_in(&m, "outer_inner", Duration::from_millis(30), false);
}

#[test]
fn endless_loops_disguised_as_counted_ones_stop_when_the_epoch_changes() {
    let (_, m) = load_sandboxed(&ptx(LOOPS));
    for k in ["twice_written", "side_entry", "step_zero", "or_combined"] {
        abort_in(&m, k, Duration::from_millis(20), false);
    }
}

#[test]
fn a_thread_stopped_in_a_loop_reports_the_fenced_access_it_made_before() {
    let (_, m) = load_sandboxed(&ptx(LOOPS));
    abort_in(&m, "fenced_then_endless", Duration::from_millis(20), true);
}

const LOCALS: &str = "
.visible .entry local_static(.param .u64 out, .param .u32 flag)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<12>;
    .reg .b32 %r<6>;
    .reg .pred %p<2>;
    mov.u64 %rd1, depot;
    ld.param.u64 %rd9, [out];
    ld.param.u32 %r1, [flag];
    add.u64 %rd2, %rd1, 8;
    add.u64 %rd3, %rd1, 60;
    st.local.u32 [%rd2], 11;
    st.local.u32 [%rd3], 22;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    add.u64 %rd4, %rd1, 16;
SKIP:
    st.local.u32 [%rd4], 33;
    ld.local.u32 %r2, [%rd2];
    ld.local.u32 %r3, [%rd3];
    ld.local.u32 %r4, [%rd4];
    st.global.u32 [%rd9], %r2;
    st.global.u32 [%rd9+4], %r3;
    st.global.u32 [%rd9+8], %r4;
    ret;
}

.visible .entry local_past_end(.param .u64 out)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<4>;
    .reg .b32 %r<2>;
    mov.u64 %rd1, depot;
    ld.param.u64 %rd3, [out];
    add.u64 %rd2, %rd1, 64;
    st.local.u32 [%rd2], 1;
    st.local.u32 [%rd1+-4], 1;
    st.global.u32 [%rd3], 5;
    ret;
}

.visible .entry local_misaligned(.param .u64 out)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<4>;
    .reg .b32 %r<2>;
    mov.u64 %rd1, depot;
    ld.param.u64 %rd3, [out];
    st.local.u32 [%rd1], 77;
    add.u64 %rd2, %rd1, 2;
    ld.local.u32 %r1, [%rd2];
    st.global.u32 [%rd3], %r1;
    ret;
}

.visible .entry local_stepped(.param .u64 out)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<4>;
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    mov.u64 %rd1, depot;
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, 0;
L:
    st.local.u32 [%rd1], %r1;
    add.u64 %rd1, %rd1, 4;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 100;
    @%p1 bra L;
    st.global.u32 [%rd3], %r1;
    ret;
}
";

#[test]
fn local_accesses_that_can_only_hit_their_array_run_unchecked_and_right() {
    let (s, m) = load_sandboxed(&ptx(LOCALS));
    let k = entry(&s.ptx, "local_static");
    for verbatim in [
        "st.local.u32 [%rd2], 11;",
        "st.local.u32 [%rd3], 22;",
        "st.local.u32 [%rd4], 33;",
        "ld.local.u32 %r4, [%rd4];",
    ] {
        assert!(k.contains(verbatim), "{verbatim} unchecked in\n{k}");
    }
    // %rd4 is unset on the flag == 0 path: the kernel starts by setting it to one of its values.
    let init = k.find("mov.u64 %rd4, depot;").expect("%rd4 initialised");
    assert!(init < k.find("ld.param.u64 %rd9, [out];").unwrap(), "{k}");
    for flag in [0, 1] {
        let got = output(&m, "local_static", 12, &[Arg::U32(flag)], false);
        assert_eq!(&got[..4], 11u32.to_le_bytes(), "flag {flag}");
        assert_eq!(&got[8..], 33u32.to_le_bytes(), "flag {flag}");
    }
}

#[test]
fn local_accesses_past_the_array_misaligned_or_through_a_stepped_register_keep_their_check() {
    let (s, m) = load_sandboxed(&ptx(LOCALS));
    assert!(!entry(&s.ptx, "local_past_end").contains("st.local.u32 [%rd2], 1;"));
    assert!(!entry(&s.ptx, "local_misaligned").contains("ld.local.u32 %r1, [%rd2];"));
    assert!(!entry(&s.ptx, "local_stepped").contains("st.local.u32 [%rd1], %r1;"));
    output(&m, "local_past_end", 4, &[], true);
    // Aligned down onto depot[0]: inside the window, so not a fenced access.
    assert_eq!(
        output(&m, "local_misaligned", 4, &[], false),
        77u32.to_le_bytes()
    );
    output(&m, "local_stepped", 4, &[], true);
}

const SHARED: &str = "
.visible .entry shared_edges(.param .u64 out, .param .u32 which)
{
    .shared .align 4 .b8 s[64];
    .reg .b64 %rd<2>;
    .reg .b32 %r<7>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [which];
    // %r1 is s at run time (which < 4), but the sandbox can only bound which >> 8 by 2^24:
    // every access here keeps its window check (bounds.rs drops provably needless ones).
    mov.u32 %r0, s;
    shr.u32 %r6, %r5, 8;
    add.u32 %r1, %r0, %r6;
    st.shared.u32 [%r1+60], 9;
    ld.shared.u32 %r4, [%r1+60];
    st.global.u32 [%rd1], %r4;
    setp.eq.u32 %p1, %r5, 1;
    @%p1 bra BELOW;
    setp.eq.u32 %p2, %r5, 2;
    @%p2 bra WRAP;
    setp.eq.u32 %p3, %r5, 3;
    @%p3 bra ACROSS;
    ret;
BELOW:
    add.u32 %r2, %r1, -4;
    st.shared.u32 [%r2], 1;
    ret;
WRAP:
    mov.u32 %r3, -4;
    st.shared.u32 [%r3], 1;
    ret;
ACROSS:
    st.shared.u32 [%r1+56], 1;
    st.shared.u32 [%r1+60], 1;
    st.shared.u32 [%r1+64], 1;
    ret;
}
";

#[test]
fn shared_accesses_below_past_and_across_the_window_edge_are_fenced() {
    let (s, m) = load_sandboxed(&ptx(SHARED));
    // One static shared variable: the window is that variable, so a 4-byte access has 64 - 4 + 1
    // in-window starts, an immediate (the 12-byte run across the edge: 53).
    let k = entry(&s.ptx, "shared_edges");
    assert!(k.contains("setp.lt.u32 %__sbx_q, %__sbx_o, 61;"), "{k}");
    assert!(k.contains(", %__sbx_o, 53;"), "{k}");
    for which in 0..4u32 {
        let got = output(&m, "shared_edges", 4, &[Arg::U32(which)], which != 0);
        assert_eq!(got, 9u32.to_le_bytes(), "case {which}");
    }
}

const ATOMS: &str = "
.visible .entry shared_atomics(.param .u64 out, .param .u32 off)
{
    .shared .align 4 .b8 s[64];
    .reg .b64 %rd<2>;
    .reg .b32 %r<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [off];
    mov.u32 %r1, s;
    st.shared.u32 [%r1], 0;
    st.shared.u32 [%r1+8], 0;
    add.u32 %r2, %r1, %r5;
    atom.shared.add.u32 %r3, [%r2], 1;
    ld.shared.u32 %r3, [%r1];
    ld.shared.u32 %r4, [%r1+8];
    st.global.u32 [%rd1], %r3;
    st.global.u32 [%rd1+4], %r4;
    ret;
}
";

#[test]
fn a_shared_atomic_out_of_its_window_goes_to_the_window_start_and_is_reported() {
    let (s, m) = load_sandboxed(&ptx(ATOMS));
    // No guard on the atomic (a guarded one is a branch around it in SASS).
    let k = entry(&s.ptx, "shared_atomics");
    assert!(
        k.contains("\tatom.shared.add.u32 %r3, [%__sbx_a], 1;"),
        "{k}"
    );
    // 32 threads: in the window, offset 8 counts them; below it or past it, word 0 does.
    let run = |off: u32, fenced| output(&m, "shared_atomics", 8, &[Arg::U32(off)], fenced);
    assert_eq!(run(8, false), [0, 0, 0, 0, 32, 0, 0, 0]);
    assert_eq!(run(u32::MAX - 3, true), [32, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(run(64, true), [32, 0, 0, 0, 0, 0, 0, 0]);
}

const SHARED_LOADS: &str = "
.visible .entry shared_loads(.param .u64 out, .param .u32 off)
{
    .shared .align 4 .b8 s[64];
    .reg .b64 %rd<2>;
    .reg .b32 %r<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [off];
    mov.u32 %r1, s;
    st.shared.u32 [%r1], 11;
    st.shared.u32 [%r1+4], 12;
    st.shared.u32 [%r1+8], 13;
    st.shared.u32 [%r1+12], 14;
    st.shared.u32 [%r1+16], 15;
    add.u32 %r2, %r1, %r5;
    ld.shared.u32 %r3, [%r2];
    ld.shared.u32 %r4, [%r2+4];
    ld.shared.u32 %r6, [%r2+8];
    add.u32 %r7, %r1, 16;
    add.u32 %r7, %r7, %r5;
    ld.shared.u32 %r7, [%r7];
    st.global.u32 [%rd1], %r3;
    st.global.u32 [%rd1+4], %r4;
    st.global.u32 [%rd1+8], %r6;
    st.global.u32 [%rd1+12], %r7;
    ret;
}
";

#[test]
fn shared_loads_out_of_their_window_read_its_start_unpredicated_and_are_reported() {
    let (s, m) = load_sandboxed(&ptx(SHARED_LOADS));
    // The run of three runs under no predicate: out of the window its address is the window's
    // start instead (predicated loads are ones ptxas neither hoists nor merges into a vector
    // load). The single load stays predicated, and skipped out of the window.
    let k = entry(&s.ptx, "shared_loads");
    let loads: Vec<&str> = k.lines().filter(|l| l.contains("ld.shared")).collect();
    let predicated = loads
        .iter()
        .filter(|l| l.trim_start().starts_with('@'))
        .count();
    assert_eq!((loads.len(), predicated), (4, 1), "{k}");
    let words = |off: u32, fenced| words_of(&m, "shared_loads", 4, off, fenced);
    // In the window: the words at the offset, and the single load 16 bytes past it.
    assert_eq!(words(0, false), [11, 12, 13, 15]);
    // The run starts below the window (the window's first words), the single load is in it.
    assert_eq!(words(u32::MAX - 3, true), [11, 12, 13, 14]);
    // Both past the window: the run reads the window's own first words, never memory outside
    // it, and the single load is skipped (its register keeps its value, the offset: 1 << 20
    // plus the window's start plus 16 is no word it could have read).
    let far = words(1 << 20, true);
    assert_eq!(far[..3], [11, 12, 13]);
    assert!(far[3] >= 1 << 20, "{far:?}");
}

/// Two shared variables, the larger second: a run of loads out of the window is redirected into
/// the larger (`BIG_ALIGN` is its declaration's alignment).
const SHARED_FLOOR: &str = "
.visible .entry shared_floor(.param .u64 out, .param .u32 off)
{
    .shared .align 4 .b8 small[8];
    .shared BIG_ALIGN .b8 big[64];
    .reg .b64 %rd<2>;
    .reg .b32 %r<9>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [off];
    mov.u32 %r1, small;
    st.shared.u32 [%r1], 1;
    st.shared.u32 [%r1+4], 2;
    mov.u32 %r8, big;
    st.shared.u32 [%r8], 21;
    st.shared.u32 [%r8+4], 22;
    st.shared.u32 [%r8+8], 23;
    add.u32 %r2, %r8, %r5;
    ld.shared.u32 %r3, [%r2];
    ld.shared.u32 %r4, [%r2+4];
    ld.shared.u32 %r6, [%r2+8];
    st.global.u32 [%rd1], %r3;
    st.global.u32 [%rd1+4], %r4;
    st.global.u32 [%rd1+8], %r6;
    ret;
}
";

#[test]
fn shared_loads_out_of_their_window_read_the_largest_variable_at_its_own_address_when_aligned() {
    // Declared aligned to the loads' width: the redirect target is the variable's own address,
    // which ptxas knows (it lays shared memory out), so it can merge the run into vector loads.
    // Declared byte-aligned: its address aligned up to the width, read inside it all the same.
    for (align, target) in [
        (".align 16", "mov.u64 \t%__sbx_st4, big;"),
        ("", "and.b64 \t%__sbx_st4, %__sbx_st4, -4;"),
    ] {
        let (s, m) = load_sandboxed(&ptx(&SHARED_FLOOR.replace("BIG_ALIGN", align)));
        let k = entry(&s.ptx, "shared_floor");
        let flat = k.split_whitespace().collect::<Vec<_>>().join(" ");
        let want = target.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&want), "{align}: no `{target}` in {k}");
        let words = |off: u32, fenced| words_of(&m, "shared_floor", 3, off, fenced);
        assert_eq!(words(0, false), [21, 22, 23], "{align}");
        // Far past the window: the larger variable's first words, never the smaller one's.
        assert_eq!(words(1 << 20, true), [21, 22, 23], "{align}");
    }
}

const GLOBAL_EDGE: &str = "
.visible .entry global_edge(.param .u64 at, .param .u64 out)
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [at];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd3, %rd1;
    mov.u64 %rd4, %rd1;
    mov.u64 %rd5, %rd1;
    mov.u64 %rd6, %rd1;
    ld.global.u8 %rs1, [%rd1];
    ld.global.u16 %rs2, [%rd3];
    ld.global.u32 %r1, [%rd4];
    ld.global.u64 %rd7, [%rd5];
    ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd6];
    st.global.u8 [%rd2], %rs1;
    st.global.u16 [%rd2+2], %rs2;
    st.global.u32 [%rd2+4], %r1;
    st.global.u64 [%rd2+8], %rd7;
    st.global.v4.u32 [%rd2+16], {%r2, %r3, %r4, %r5};
    ret;
}


.visible .entry global_edge_loop(.param .u64 at, .param .u64 out)
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<9>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [at];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd3, %rd1;
    mov.u64 %rd4, %rd1;
    mov.u64 %rd5, %rd1;
    mov.u64 %rd6, %rd1;
    mov.u32 %r0, 0;
L:
    ld.global.u8 %rs1, [%rd1];
    ld.global.u16 %rs2, [%rd3];
    ld.global.u32 %r1, [%rd4];
    ld.global.u64 %rd7, [%rd5];
    ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd6];
    st.global.u8 [%rd2], %rs1;
    st.global.u16 [%rd2+2], %rs2;
    st.global.u32 [%rd2+4], %r1;
    st.global.u64 [%rd2+8], %rd7;
    st.global.v4.u32 [%rd2+16], {%r2, %r3, %r4, %r5};
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra L;
    ret;
}
";

/// The two forms of a global fence at the arena's end (fence.rs, `global_access`), with the one
/// limit that serves every width: an access at the arena's last byte is aligned down onto the
/// last whole element of its width and runs unreported, in a loop and in straight-line code.
/// One byte further every width is fenced: in a loop a fenced load is skipped and reads zeros,
/// in straight-line code it is sent to the base and reads the arena's first bytes.
#[test]
fn global_accesses_at_the_arenas_last_byte_run_aligned_down_and_one_past_are_fenced() {
    let (s, m) = load_sandboxed(&ptx(GLOBAL_EDGE));
    assert!(entry(&s.ptx, "global_edge_loop").contains("@%__sbx_q ld.global.u32"));
    assert!(!entry(&s.ptx, "global_edge").contains("@%__sbx_q ld.global"));
    let arena = super::sandbox::ARENA as u64;
    let tail: Vec<u8> = (0..32u8).map(|b| 0xe0 | (b & 0x1f)).collect();
    let head: Vec<u8> = (0..32u8).collect();
    for (kernel, past) in [
        ("global_edge_loop", 1u64),
        ("global_edge_loop", 0),
        ("global_edge", 1),
        ("global_edge", 0),
    ] {
        // One limit for every width: all run in range, or all are fenced.
        let fenced = past == 0;
        let mut out = 0;
        let mem = super::redteam::attack_in(
            &m,
            kernel,
            Shape::linear(1, 32),
            |g| {
                let first = g.alloc(32);
                g.write(first, &head);
                out = g.alloc(32);
                g.write(g.base() + arena - 32, &tail);
                vec![Arg::U64(g.base() + arena - past), Arg::U64(out)]
            },
            fenced,
        );
        let got = mem.read(out, 32);
        // Each width's element: the tail's last one in range; fenced, zeros in the loop (the
        // load skipped) and the head's first one in straight-line code (sent to the base).
        let zeros = [0u8; 16];
        let want = |w: usize| match (fenced, kernel) {
            (false, _) => &tail[32 - w..],
            (true, "global_edge_loop") => &zeros[..w],
            (true, _) => &head[..w],
        };
        let at = [(1, 0..1), (2, 2..4), (4, 4..8), (8, 8..16), (16, 16..32)];
        for (w, range) in at {
            assert_eq!(
                &got[range],
                want(w),
                "{kernel}, {w} bytes, {past} before the end"
            );
        }
    }
}
