//! Loop versioning of count-down loops (sandbox/version/until.rs): loops whose back-edge is
//! taken while `iv != C`, as nvcc rotates counted loops (`add r, r, -2; setp.ne r, 0; @p bra`).
//! Such a loop may run 2^bits iterations, so the poll-free copy is safe only where its entry
//! check is right. Every start, bound and step here (odd starts for step -2, `v0 == C`, steps
//! that jump over the bound, k = 0, huge starts, both signs, 32 and 64 bits, the compare before
//! or after the add, `setp.eq` with `@!p`) either gives the bytes the unrewritten loop gives or,
//! past `CAP` iterations, is stopped by an abort; the fast copy runs exactly when the module's
//! proof allows; and a loop whose step the loop writes is not versioned and still stops.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ptxvm::Module;
use ptxvm::sandbox::Policy;

use super::fastpath::{entry, output_in, polls};
use super::harness::{self, DevMem};
use super::redteam::{EPOCH, abort_in_with, ptx};
use super::sandbox::{Arg, GuestMem, Hidden, Shape, load_sandboxed, load_sandboxed_with};
use super::versioned::loop_kernel;

/// Loops past this many iterations count as endless here (the poll interval is 1024).
const CAP: u64 = 1500;

/// One count-down shape: `do { n++; out = n; iv += step; } while (iv != limit)`, `bits` wide.
#[derive(Clone, Copy, Debug)]
struct Kind {
    bits: u32,
    /// The compare reads `iv` before the add (the values checked are v0, v0 + k, ...).
    before: bool,
    /// Spelled `setp.eq p` and `@!p bra` rather than `setp.ne p` and `@p bra`.
    eq: bool,
    /// Step and bound as immediates (`step`, `limit` ignored at launch): nvcc's shape.
    imm: Option<(i64, i64)>,
}

impl Kind {
    fn all() -> Vec<Kind> {
        let mut v = Vec::new();
        for bits in [32, 64] {
            for (before, eq) in [(false, false), (true, false), (false, true), (true, true)] {
                v.push(Kind {
                    bits,
                    before,
                    eq,
                    imm: None,
                });
            }
            for imm in [(-2, 0), (3, 1000), (-1, -5)] {
                v.push(Kind {
                    bits,
                    before: false,
                    eq: false,
                    imm: Some(imm),
                });
            }
        }
        v
    }

    fn name(&self) -> String {
        // `-` spelled `m`: immediates (-2, 0) give `_immm2_0`.
        let imm = self.imm.map_or(String::new(), |(k, c)| {
            format!("_imm{k}_{c}").replace('-', "m")
        });
        format!(
            "countdown{}_{}_{}{imm}",
            self.bits,
            if self.before { "before" } else { "after" },
            if self.eq { "eq" } else { "ne" },
        )
    }

    fn ptx(&self) -> String {
        let r = if self.bits == 32 { "%r" } else { "%rd" };
        let ty = format!("s{}", self.bits);
        let (step, limit) = match self.imm {
            Some((k, c)) => (k.to_string(), c.to_string()),
            None => (format!("{r}3"), format!("{r}2")),
        };
        let add = format!("add.{ty} {r}1, {r}1, {step};");
        let (cmp, guard) = if self.eq {
            ("eq", "@!%p1")
        } else {
            ("ne", "@%p1")
        };
        let setp = format!("setp.{cmp}.{ty} %p1, {r}1, {limit};");
        let (first, second) = if self.before {
            (setp, add)
        } else {
            (add, setp)
        };
        let tail = format!("{first}\n    {second}\n    {guard} bra L;");
        loop_kernel(&self.name(), self.bits, &tail)
    }

    /// (start, limit, step) as the loop sees them: the immediates replace the launch's.
    fn effective(&self, start: i64, limit: i64, step: i64) -> (u64, u64, u64) {
        let mask = if self.bits == 32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let (limit, step) = self.imm.map_or((limit, step), |(k, c)| (c, k));
        (start as u64 & mask, limit as u64 & mask, step as u64 & mask)
    }

    /// The iterations the loop runs (wrapping as the hardware does), or `None` past `CAP`.
    fn iterations(&self, start: i64, limit: i64, step: i64) -> Option<u64> {
        let mask = if self.bits == 32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let (mut iv, limit, step) = self.effective(start, limit, step);
        for n in 1..=CAP {
            let read_before = iv;
            iv = iv.wrapping_add(step) & mask;
            let read = if self.before { read_before } else { iv };
            if read == limit {
                return Some(n);
            }
        }
        None
    }

    /// Whether the module's proof lets the fast copy run: 1 <= m <= 2^32, D >= 1, m | D,
    /// D <= 1023 m (poll interval 1024).
    fn provably_short(&self, start: i64, limit: i64, step: i64) -> bool {
        let w = if self.bits == 32 {
            1u128 << 32
        } else {
            1u128 << 64
        };
        let (v0, c, k) = self.effective(start, limit, step);
        let (v0, c, k) = (u128::from(v0), u128::from(c), u128::from(k));
        let negative = k >= w / 2;
        let m = if negative { w - k } else { k };
        let d = if negative {
            (v0 + w - c) % w
        } else {
            (c + w - v0) % w
        };
        (1..=1 << 32).contains(&m) && d >= 1 && d % m == 0 && d <= 1023 * m
    }

    fn arg(&self, v: i64) -> Arg {
        if self.bits == 32 {
            Arg::U32(v as u32)
        } else {
            Arg::U64(v as u64)
        }
    }

    fn args(&self, start: i64, limit: i64, step: i64) -> [Arg; 3] {
        [self.arg(start), self.arg(limit), self.arg(step)]
    }
}

/// The kinds' text, as written; rewritten and loaded (versioned, and not).
fn modules() -> &'static (String, Module, Module, Module) {
    static M: std::sync::OnceLock<(String, Module, Module, Module)> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        let text = ptx(&Kind::all().iter().map(Kind::ptx).collect::<String>());
        let (s, m) = load_sandboxed(&text);
        let off = Policy {
            version_loops: false,
            ..Default::default()
        };
        let (_, unversioned) = load_sandboxed_with(&text, &off);
        let plain = Module::load(&text).unwrap_or_else(|e| panic!("{e}"));
        (s.ptx, m, unversioned, plain)
    })
}

/// The unrewritten kernel's 8 bytes of output (one thread).
fn unsandboxed(m: &Module, kernel: &str, args: &[Arg]) -> Vec<u8> {
    let mut mem = DevMem::new();
    let out = mem.alloc(8);
    let shape = harness::Shape::linear(1, 1);
    harness::run(
        m,
        kernel,
        &shape,
        &[&[Arg::U64(out)][..], args].concat(),
        &mem,
    )
    .unwrap_or_else(|f| panic!("{kernel}: {f}"));
    mem.download::<u8>(out, 8)
}

/// Instructions one sandboxed thread of `kernel` runs.
fn instructions(m: &Module, kernel: &str, args: &[Arg]) -> u64 {
    let mut mem = GuestMem::new();
    let out = mem.alloc(8);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    let all = [&[Arg::U64(out)][..], args].concat();
    super::sandbox::run_sandboxed(m, kernel, Shape::linear(1, 1), &all, &hidden, &mem)
        .unwrap_or_else(|f| panic!("{kernel}: {f}"))
        .warp_instructions
}

/// Starts and bounds around every edge the check must get right, at `bits` bits.
fn values(bits: u32) -> Vec<i64> {
    let mut v = vec![
        0, 1, 2, 3, 4, 7, 100, 999, 1000, 1022, 1023, 1024, 2046, 2048, 3069,
    ];
    v.extend([-1, -2, -3, -1000, i64::from(i32::MAX), i64::from(i32::MIN)]);
    if bits == 64 {
        v.extend([i64::MAX, i64::MIN, 1 << 32, (1 << 32) + 2, 1 << 62]);
    }
    v
}

fn steps(bits: u32) -> Vec<i64> {
    let mut v = vec![0, 1, -1, 2, -2, 3, -3, 4, -4, 1000, -1000, 1 << 30];
    v.extend([i64::from(i32::MIN), i64::from(i32::MAX)]);
    if bits == 64 {
        v.extend([i64::MIN, 1 << 32, -(1 << 32), (1 << 32) + 1, 1 << 40]);
    }
    v
}

#[test]
fn every_count_down_shape_gets_a_poll_free_copy_behind_its_check() {
    let (text, ..) = modules();
    for k in Kind::all() {
        let e = entry(text, &k.name());
        assert!(e.contains("$gpuhost_v"), "{e}");
        assert!(e.contains("@!%gpuhost_vp bra"), "{e}");
        assert_eq!(
            polls(text, &k.name()),
            1,
            "only the original copy polls:\n{e}"
        );
    }
}

#[test]
fn count_down_loops_give_the_unrewritten_bytes_and_endless_ones_still_stop() {
    let (_, m, _, plain) = modules();
    let (mut finite, mut endless) = (0, 0);
    for k in Kind::all() {
        let vals = values(k.bits);
        // With both immediates, only the start varies.
        let (limits, steps) = match k.imm {
            Some(_) => (vec![0], vec![0]),
            None => (vals.clone(), steps(k.bits)),
        };
        for &start in &vals {
            for &limit in &limits {
                for &step in &steps {
                    let case = format!("{} start {start} limit {limit} step {step}", k.name());
                    let args = k.args(start, limit, step);
                    match k.iterations(start, limit, step) {
                        Some(n) => {
                            finite += 1;
                            let got = output_in(m, &k.name(), Shape::linear(1, 1), 8, &args, false);
                            assert_eq!(got[4..], (n as u32).to_le_bytes(), "{case}");
                            assert_eq!(got, unsandboxed(plain, &k.name(), &args), "{case}");
                        }
                        None if endless % 97 == 0 || endless < 40 => {
                            endless += 1;
                            abort_in_with(m, &k.name(), Duration::from_millis(2), false, &args);
                        }
                        None => endless += 1,
                    }
                }
            }
        }
    }
    assert!(
        finite > 2000 && endless > 1000,
        "{finite} finite, {endless} endless cases"
    );
}

/// The cases the brief of this pass names, each stopped by an abort: an odd start for step -2
/// (never meets 0), a start at the bound (2^bits / m iterations), k = 0, a huge start.
#[test]
fn hostile_count_downs_run_the_polled_copy_and_stop() {
    let (_, m, ..) = modules();
    let by_name = |n: &str| Kind::all().into_iter().find(|k| k.name() == n).unwrap();
    let nvcc = by_name("countdown32_after_ne_immm2_0");
    let reg32 = by_name("countdown32_after_ne");
    let eq64 = by_name("countdown64_before_eq");
    let cases: [(Kind, [i64; 3]); 8] = [
        (nvcc, [7, 0, 0]),
        (nvcc, [0, 0, 0]),
        (nvcc, [-1, 0, 0]),
        (reg32, [5, 5, -1]),
        (reg32, [1, 9, 0]),
        (reg32, [-1, 0, -1]),
        (reg32, [0, 3, 2]),
        (eq64, [i64::MAX, 0, -2]),
    ];
    for (k, [start, limit, step]) in cases {
        assert_eq!(k.iterations(start, limit, step), None, "{k:?} {start}");
        assert!(!k.provably_short(start, limit, step));
        abort_in_with(
            m,
            &k.name(),
            Duration::from_millis(2),
            false,
            &k.args(start, limit, step),
        );
    }
}

#[test]
fn the_fast_copy_runs_exactly_when_the_proof_allows() {
    // A polled iteration runs more instructions than a fast one: with more than the check's
    // few iterations, the versioned loop runs fewer instructions than the unversioned one only
    // if it took the fast copy.
    let (_, m, unversioned, _) = modules();
    let (mut fast, mut slow) = (0, 0);
    for k in Kind::all() {
        let (limits, steps) = match k.imm {
            Some(_) => (vec![0], vec![0]),
            None => (values(k.bits), steps(k.bits)),
        };
        for &start in &values(k.bits) {
            for &limit in &limits {
                for &step in &steps {
                    let Some(n) = k.iterations(start, limit, step) else {
                        continue;
                    };
                    if n < 40 {
                        continue;
                    }
                    let args = k.args(start, limit, step);
                    let ran = instructions(m, &k.name(), &args);
                    let polled = instructions(unversioned, &k.name(), &args);
                    let short = k.provably_short(start, limit, step);
                    let case = format!("{} start {start} limit {limit} step {step}", k.name());
                    assert_eq!(ran < polled, short, "{case}: {ran} vs {polled}");
                    if short { fast += 1 } else { slow += 1 }
                }
            }
        }
    }
    assert!(fast > 100 && slow > 20, "{fast} fast, {slow} slow");
}

const STEP_WRITTEN: &str = "
.visible .entry step_written(.param .u64 out, .param .u32 start)
{
    .reg .b64 %rd<8>;
    .reg .b32 %r<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd7, [out];
    ld.param.u32 %r1, [start];
    mov.u32 %r3, -2;
    mov.u32 %r6, 0;
L:
    add.u32 %r6, %r6, 1;
    st.global.u32 [%rd7], %r6;
    add.s32 %r1, %r1, %r3;
    neg.s32 %r3, %r3;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra L;
    ret;
}

.visible .entry eq_anded(.param .u64 out, .param .u32 start, .param .u32 q)
{
    .reg .b64 %rd<8>;
    .reg .b32 %r<8>;
    .reg .pred %p<3>;
    ld.param.u64 %rd7, [out];
    ld.param.u32 %r1, [start];
    ld.param.u32 %r2, [q];
    setp.ne.u32 %p2, %r2, 0;
    mov.u32 %r6, 0;
L:
    add.u32 %r6, %r6, 1;
    st.global.u32 [%rd7], %r6;
    add.s32 %r1, %r1, -1;
    setp.eq.and.s32 %p1, %r1, 0, %p2;
    @!%p1 bra L;
    ret;
}
";

#[test]
fn a_loop_that_writes_its_step_or_ands_its_exit_is_not_versioned_and_stops() {
    // Step -2, then 2, -2, ...: from 4 it meets 0 after two steps by a check's reckoning of
    // step -2, and runs 4, 2, 4, 2 for ever. `@!p` over `iv == 0 && q` loops for ever when q
    // is false.
    let (s, m) = load_sandboxed(&ptx(STEP_WRITTEN));
    for (name, args) in [
        ("step_written", vec![Arg::U32(4)]),
        ("eq_anded", vec![Arg::U32(5), Arg::U32(0)]),
    ] {
        let e = entry(&s.ptx, name);
        assert!(!e.contains("$gpuhost_v"), "{e}");
        assert_eq!(polls(&s.ptx, name), 1, "{e}");
        abort_in_with(&m, name, Duration::from_millis(5), false, &args);
    }
}

/// Immediates written wider than the compare (`-2` as `4294967294`, `0` as `4294967296`), which
/// ptxas and ptxvm read at the compare's width: the check reads them so too, and the loop
/// gives the unrewritten bytes or stops.
#[test]
fn immediates_wider_than_the_compare_are_read_at_its_width() {
    let tail =
        "add.s32 %r1, %r1, 4294967294;\n    setp.ne.s32 %p1, %r1, 4294967296;\n    @%p1 bra L;";
    let text = ptx(&loop_kernel("wide", 32, tail));
    let plain = Module::load(&text).unwrap_or_else(|e| panic!("{e}"));
    let (s, m) = load_sandboxed(&text);
    assert!(entry(&s.ptx, "wide").contains("@!%gpuhost_vp bra"));
    for start in [2u32, 6, 2046, 2048, 4096] {
        let args = [Arg::U32(start), Arg::U32(0), Arg::U32(0)];
        let got = output_in(&m, "wide", Shape::linear(1, 1), 8, &args, false);
        assert_eq!(got[4..], (start / 2).to_le_bytes(), "start {start}");
        assert_eq!(got, unsandboxed(&plain, "wide", &args), "start {start}");
    }
    for start in [0u32, 7, u32::MAX] {
        let args = [Arg::U32(start), Arg::U32(0), Arg::U32(0)];
        abort_in_with(&m, "wide", Duration::from_millis(2), false, &args);
    }
}
