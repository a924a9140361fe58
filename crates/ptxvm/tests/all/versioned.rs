//! Loop versioning (sandbox/version.rs) keeps every guarantee: a loop bounded by a register runs a
//! poll-free copy only when its entry check proves it short, gives the answers the unrewritten
//! loop gives for every start, bound and step (wrap-around included), and every loop the check
//! cannot prove short still polls and stops; halving loops run without polls; a module that
//! names what the pass would add is left alone.

use std::time::Duration;

use ptxvm::Module;

use super::fastpath::{entry, output_in, polls};
use super::redteam::{abort_in_with, ptx};
use super::sandbox::{Arg, Shape, load_sandboxed};

/// Loops past this many iterations count as endless here: the test expects an abort to stop them.
const CAP: u64 = 1500;

/// One loop shape: `do { n++; out = n; iv += step; } while (iv CMP limit)` at `bits` bits.
#[derive(Clone, Copy, Debug)]
struct LoopKind {
    signed: bool,
    le: bool,
    bits: u32,
}

impl LoopKind {
    fn all() -> Vec<LoopKind> {
        let mut v = Vec::new();
        for bits in [32, 64] {
            for signed in [false, true] {
                for le in [false, true] {
                    v.push(LoopKind { signed, le, bits });
                }
            }
        }
        v
    }

    fn name(&self) -> String {
        format!(
            "loop_{}{}_{}",
            if self.signed { 's' } else { 'u' },
            self.bits,
            if self.le { "le" } else { "lt" }
        )
    }

    fn ptx(&self) -> String {
        let ty = format!("{}{}", if self.signed { 's' } else { 'u' }, self.bits);
        let r = if self.bits == 32 { "%r" } else { "%rd" };
        let cmp = if self.le { "le" } else { "lt" };
        let tail = format!(
            "add.{ty} {r}1, {r}1, {r}3;\n    setp.{cmp}.{ty} %p1, {r}1, {r}2;\n    @%p1 bra L;"
        );
        loop_kernel(&self.name(), self.bits, &tail)
    }

    /// The iterations the loop runs (wrapping as the hardware does), or `None` past `CAP`.
    fn iterations(&self, start: i64, limit: i64, step: i64) -> Option<u64> {
        let wrap = |x: i128| -> i128 {
            let m = 1i128 << self.bits;
            let u = x.rem_euclid(m);
            if self.signed && u >= m / 2 { u - m } else { u }
        };
        let (mut iv, limit, step) = (wrap(start.into()), wrap(limit.into()), wrap(step.into()));
        for n in 1..=CAP {
            iv = wrap(iv + step);
            let taken = if self.le { iv <= limit } else { iv < limit };
            if !taken {
                return Some(n);
            }
        }
        None
    }

    fn arg(&self, v: i64) -> Arg {
        if self.bits == 32 {
            Arg::U32(v as u32)
        } else {
            Arg::U64(v as u64)
        }
    }
}

/// Entry `name(out, start, limit, step)`, the last three `bits` wide in `{r}1..3` (`%r` or `%rd`):
/// `do { n++; *out = n; <tail> } while ...` with `tail` ending in `bra L`; `out[1] = n` after.
pub fn loop_kernel(name: &str, bits: u32, tail: &str) -> String {
    let (r, pty) = if bits == 32 {
        ("%r", "u32")
    } else {
        ("%rd", "u64")
    };
    format!(
        "
.visible .entry {name}(.param .u64 out, .param .{pty} start, .param .{pty} limit, .param .{pty} step)
{{
    .reg .b64 %rd<8>;
    .reg .b32 %r<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd7, [out];
    ld.param.{pty} {r}1, [start];
    ld.param.{pty} {r}2, [limit];
    ld.param.{pty} {r}3, [step];
    mov.u32 %r6, 0;
L:
    add.u32 %r6, %r6, 1;
    st.global.u32 [%rd7], %r6;
    {tail}
    st.global.u32 [%rd7+4], %r6;
    ret;
}}
"
    )
}

fn module() -> &'static (String, Module) {
    static M: std::sync::OnceLock<(String, Module)> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        let text: String = LoopKind::all().iter().map(LoopKind::ptx).collect();
        let (s, m) = load_sandboxed(&ptx(&text));
        (s.ptx, m)
    })
}

#[test]
fn a_loop_bounded_by_registers_gets_one_poll_free_copy_behind_its_check() {
    let (text, _) = module();
    for s in LoopKind::all() {
        let e = entry(text, &s.name());
        assert!(e.contains("$gpuhost_v"), "{e}");
        assert_eq!(
            polls(text, &s.name()),
            1,
            "only the original copy polls:\n{e}"
        );
        assert!(e.contains("@!%gpuhost_vp bra"), "{e}");
    }
}

/// Starts, bounds and steps around every edge the check must get right, at `bits` bits.
fn values(bits: u32, signed: bool) -> Vec<i64> {
    let (min, max): (i64, i64) = match (bits, signed) {
        (32, false) => (0, u32::MAX as i64),
        (32, true) => (i32::MIN as i64, i32::MAX as i64),
        (_, false) => (0, -1), // u64::MAX as the same bits
        (_, true) => (i64::MIN, i64::MAX),
    };
    let mut v = vec![0, 1, 3, 1000, 1100, 2500, -1, -100];
    v.extend([min, max, max.wrapping_sub(40)]);
    if bits == 64 {
        v.extend([1 << 62, (1 << 62) + 1, (1 << 62) - 5, 1 << 32]);
    }
    v
}

#[test]
fn versioned_loops_give_the_unrewritten_answer_and_endless_ones_still_stop() {
    let (_, m) = module();
    let (mut finite, mut endless) = (0, 0);
    for s in LoopKind::all() {
        let vals = values(s.bits, s.signed);
        let steps = [0i64, 1, 3, 32, 1000, -1];
        for &start in &vals {
            for &limit in &vals {
                for &step in &steps {
                    let case = format!("{} start {start} limit {limit} step {step}", s.name());
                    let args = [s.arg(start), s.arg(limit), s.arg(step)];
                    match s.iterations(start, limit, step) {
                        Some(n) => {
                            finite += 1;
                            let got = output_in(m, &s.name(), Shape::linear(1, 1), 8, &args, false);
                            assert_eq!(got[4..], (n as u32).to_le_bytes(), "{case}");
                        }
                        None if endless < 24 || (start, limit) == (0, -1) => {
                            endless += 1;
                            abort_in_with(m, &s.name(), Duration::from_millis(2), false, &args);
                        }
                        None => {}
                    }
                }
            }
        }
    }
    assert!(
        finite > 1000 && endless >= 24,
        "{finite} finite, {endless} endless cases"
    );
}

const OTHERS: &str = "
.visible .entry halving(.param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
L:
    add.u32 %r2, %r2, 1;
    shr.u32 %r1, %r1, 1;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra L;
    st.global.u32 [%rd1], %r2;
    ret;
}

.visible .entry halving_signed(.param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
L:
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd1], %r2;
    shr.s32 %r1, %r1, 1;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra L;
    ret;
}

.visible .entry bound_written(.param .u64 out, .param .u32 n)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, 0;
L:
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd1], %r2;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra L;
    ret;
}
";

#[test]
fn a_halving_loop_runs_without_polls_and_an_arithmetic_shift_still_polls_and_stops() {
    let (s, m) = load_sandboxed(&ptx(OTHERS));
    assert_eq!(polls(&s.ptx, "halving"), 0, "{}", entry(&s.ptx, "halving"));
    for (n, want) in [(0u32, 1u32), (1, 1), (2, 2), (1000, 10), (u32::MAX, 32)] {
        let got = output_in(
            &m,
            "halving",
            Shape::linear(1, 32),
            4,
            &[Arg::U32(n)],
            false,
        );
        assert_eq!(got, want.to_le_bytes(), "n = {n}");
    }
    // -1 >> 1 is -1 for ever.
    assert_eq!(polls(&s.ptx, "halving_signed"), 1);
    abort_in_with(
        &m,
        "halving_signed",
        Duration::from_millis(5),
        false,
        &[Arg::U32(u32::MAX)],
    );
}

#[test]
fn a_loop_that_writes_its_bound_is_not_versioned_and_stops() {
    let (s, m) = load_sandboxed(&ptx(OTHERS));
    let e = entry(&s.ptx, "bound_written");
    assert!(!e.contains("$gpuhost_v"), "{e}");
    assert_eq!(polls(&s.ptx, "bound_written"), 1, "{e}");
    abort_in_with(
        &m,
        "bound_written",
        Duration::from_millis(5),
        false,
        &[Arg::U32(1)],
    );
}

#[test]
fn a_module_that_names_what_versioning_adds_is_left_unversioned() {
    // A branch to the label the pass would give the fast copy must not enter it unchecked:
    // with the name taken, nothing is versioned (and the undeclared label fails the load).
    let text = LoopKind::all()[0].ptx().replace(
        "    mov.u32 %r6, 0;\n",
        "    mov.u32 %r6, 0;\n    @%p1 bra $gpuhost_v1_f;\n",
    );
    let out = ptxvm::sandbox::sandbox(&ptx(&text), &ptxvm::sandbox::Policy::default());
    match out {
        Ok(s) => assert!(!s.ptx.contains("$gpuhost_v1_f:"), "{}", s.ptx),
        Err(e) => assert!(e.to_string().contains("gpuhost_v1_f"), "{e}"),
    }
    let declared = LoopKind::all()[0].ptx().replace(
        ".reg .pred %p<2>;",
        ".reg .pred %p<2>;\n    .reg .b64 %gpuhost_vd<4>;",
    );
    let (s, _) = load_sandboxed(&ptx(&declared));
    assert!(!s.ptx.contains("$gpuhost_v"), "{}", s.ptx);
}

/// The fast copies' labels are trusted across the module (bounded.rs exempts a back-edge to one
/// from polling): a kernel that names one for its own endless loop, next to a kernel whose loop
/// is versioned under that very name, kept the loop unpolled, and no stop ended it. A module
/// that names what the pass adds anywhere is now left unversioned as a whole.
#[test]
fn a_kernel_naming_another_kernels_fast_copy_label_still_polls_and_stops() {
    // Endless: the branch tests the step, which the loop never changes.
    let named = loop_kernel(
        "named",
        32,
        "setp.ne.u32 %p1, %r3, 0;\n    @%p1 bra $gpuhost_v1_f;",
    )
    .replace("\nL:\n", "\n$gpuhost_v1_f:\n");
    let text = ptx(&format!("{named}{}", LoopKind::all()[0].ptx()));
    let (s, m) = load_sandboxed(&text);
    assert_eq!(polls(&s.ptx, "named"), 1, "{}", entry(&s.ptx, "named"));
    let args = [Arg::U32(0), Arg::U32(0), Arg::U32(1)];
    abort_in_with(&m, "named", Duration::from_millis(5), false, &args);
    assert!(
        !s.ptx.contains("%gpuhost_vp"),
        "nothing versioned\n{}",
        s.ptx
    );
}

/// A guarded branch to a label the body lacks, as the body's first instruction, is a back-edge
/// (its target unknown) from position 0 to position 0: both loop finders, versioning's and
/// the poll's, took it for a loop and cut its body out of the function past its end, a panic
/// on a guest's text. It is no loop: whatever the rewrite answers, it answers.
#[test]
fn a_first_branch_to_a_missing_label_is_no_loop() {
    let text = ptx(".visible .entry k(.param .u64 o)\n{\n.reg .pred %p<2>;\n\
                    @%p1 bra NOWHERE;\nret;\n}\n");
    for version_loops in [true, false] {
        let policy = ptxvm::sandbox::Policy {
            version_loops,
            ..Default::default()
        };
        let _ = ptxvm::sandbox::sandbox(&text, &policy);
    }
}

/// `nested(out, inner, outer)`: an outer loop of `outer` iterations (endless at 0: its counter
/// meets 0 only after wrapping) around an inner loop of `inner`, register-bounded (versioned);
/// every inner iteration counts into `out[0]`, and `out[1]` is the count at the end.
const NESTED: &str = "
.visible .entry nested(.param .u64 out, .param .u32 inner, .param .u32 outer)
{
    .reg .b64 %rd<8>;
    .reg .b32 %r<8>;
    .reg .pred %p<3>;
    ld.param.u64 %rd7, [out];
    ld.param.u32 %r2, [inner];
    ld.param.u32 %r4, [outer];
    mov.u32 %r6, 0;
    mov.u32 %r5, 0;
O:
    mov.u32 %r1, 0;
L:
    add.u32 %r6, %r6, 1;
    st.global.u32 [%rd7], %r6;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, %r2;
    @%p1 bra L;
    add.u32 %r5, %r5, 1;
    setp.ne.u32 %p2, %r5, %r4;
    @%p2 bra O;
    st.global.u32 [%rd7+4], %r6;
    ret;
}
";

/// A short versioned loop inside another loop is charged to the outer loop's count by its
/// entry check's estimate of its back-edges, not as a whole poll interval: charged that way,
/// mbarrier_pipeline's producer polled (waited on a global load) on every tile. The outer loop
/// must still poll and stop, and both copies of the inner loop still answer right.
#[test]
fn a_versioned_loop_inside_another_charges_its_estimate_and_the_outer_loop_still_stops() {
    let (s, m) = load_sandboxed(&ptx(NESTED));
    let e = entry(&s.ptx, "nested");
    assert_eq!(
        e.matches("sub.sat.s32 %__sbx_cnt, %__sbx_cnt, %gpuhost_vt;")
            .count(),
        1,
        "one charge, where the fast copy is entered:\n{e}"
    );
    assert_eq!(
        polls(&s.ptx, "nested"),
        2,
        "the outer loop and the inner's original:\n{e}"
    );
    assert!(
        !e.contains("sub.s32 %__sbx_cnt, %__sbx_cnt, 1024;"),
        "the outer back-edge counts itself only:\n{e}"
    );
    // The fast copy (5 iterations) and the original (2000, past the poll interval), each many
    // poll intervals' worth of outer iterations.
    for (inner, outer) in [(5u32, 3000u32), (2000, 3)] {
        let args = [Arg::U32(inner), Arg::U32(outer)];
        let got = output_in(&m, "nested", Shape::linear(1, 32), 8, &args, false);
        let want = (inner * outer).to_le_bytes();
        assert_eq!(got, [want, want].concat(), "inner {inner} outer {outer}");
    }
    for inner in [1, 5, 1023] {
        abort_in_with(
            &m,
            "nested",
            Duration::from_millis(5),
            false,
            &[Arg::U32(inner), Arg::U32(0)],
        );
    }
}
