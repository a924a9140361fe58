//! Abort polling and the prologue: every function loads the hidden values into sandbox
//! registers; kernels compute their shared and local windows and poll the abort word once at
//! entry, and so does every other function that reads hidden values, at each call; every
//! back-edge counts, and every `poll_interval` back-edges the thread reads the control block's
//! epoch and, if it is not its launch's epoch, takes a stop path out of line (report.rs) that
//! reports the stop and exits (at a guarded back-edge: leaves the loop). Functions left alone
//! (`lean::functions`) have a bounded straight run instead ([`super::LEAN_SPAN`]).

use super::hash::HashMap;
use super::put::put;
use std::borrow::Cow;
use std::sync::OnceLock;

use super::params::{hidden_param, hidden_params, spelled};
use super::print::O;
use super::rewrite::{Fx, R, emit_line, imm, sreg};
use super::{MIN_ALIGN, MIN_ARENA};
use crate::ast::{Inst, Operand, Stmt, Str};

const U64_REGS: &[&str] = &[
    "base", "size", "globals", "ctl", "launch", "slo", "shi", "llo", "lhi", "a", "b", "c", "d",
    "lim", "x", "zz",
];
const U32_REGS: &[&str] = &[
    "epoch", "tag", "cnt", "t", "e", "sl", "ll", "ss", "ls", "o", "f", "z",
];
const PRED_REGS: &[&str] = &["p", "q", "bp"];

/// The fixed sandbox registers' names (of those above), spelled out: most emitted operands
/// are these, and borrowing one costs less than building it (an allocation, then a free once
/// printed).
const FIXED: &[&str] = &[
    "%__sbx_a",
    "%__sbx_p",
    "%__sbx_q",
    "%__sbx_t",
    "%__sbx_x",
    "%__sbx_b",
    "%__sbx_c",
    "%__sbx_d",
    "%__sbx_e",
    "%__sbx_f",
    "%__sbx_o",
    "%__sbx_tag",
    "%__sbx_lim",
    "%__sbx_cnt",
    "%__sbx_size",
    "%__sbx_base",
    "%__sbx_epoch",
    "%__sbx_launch",
    "%__sbx_globals",
    "%__sbx_slo",
    "%__sbx_shi",
    "%__sbx_llo",
    "%__sbx_lhi",
    "%__sbx_sl",
    "%__sbx_ll",
    "%__sbx_ss",
    "%__sbx_ls",
    "%__sbx_z",
    "%__sbx_zz",
];

/// `%__sbx_<n>`, borrowed when it is one of [`FIXED`].
pub(super) fn sreg_name(n: &str) -> Str<'static> {
    spelled(FIXED, "%__sbx_", n)
}

/// `%__sbx_st<w>`: the kernel's largest static shared variable's address (aligned up to `w`
/// when declared less aligned), where an out-of-window shared atomic or run of loads goes
/// instead (window.rs); the prologue sets one for each width used.
pub(super) fn st_reg(w: u64) -> Operand<'static> {
    Operand::Name(super::rewrite::numbered("%__sbx_st", w).into())
}

/// Variables of known size, as `window` takes them, sorted by name (the emitted PTX must not
/// depend on a HashMap's order).
fn sized<'m>(vars: &HashMap<&'m str, u64>) -> Vec<(&'m str, Option<u64>)> {
    let mut v: Vec<_> = vars.iter().map(|(n, s)| (*n, Some(*s))).collect();
    v.sort_unstable();
    v
}

fn decl(ty: &'static str, names: &[&str], line: u32) -> Stmt<'static> {
    Stmt::Reg {
        ty: ty.into(),
        names: names
            .iter()
            .map(|n| (["%__sbx_", n].concat().into(), None))
            .collect(),
        line,
    }
}

/// The 32-bit forms of the shared window (`Fx::window_limits`): its low end and size.
const SHARED_LIMITS: &str = "\tcvt.u32.u64 %__sbx_sl, %__sbx_slo;\n\
    \tcvt.u32.u64 %__sbx_ss, %__sbx_shi;\n\
    \tsub.u32 %__sbx_ss, %__sbx_ss, %__sbx_sl;\n\
    \tadd.u32 %__sbx_sl, %__sbx_sl, %__sbx_z;\n\
    \tadd.u32 %__sbx_ss, %__sbx_ss, %__sbx_z;\n";

/// [`SHARED_LIMITS`] of the local window.
const LOCAL_LIMITS: &str = "\tcvt.u32.u64 %__sbx_ll, %__sbx_llo;\n\
    \tcvt.u32.u64 %__sbx_ls, %__sbx_lhi;\n\
    \tsub.u32 %__sbx_ls, %__sbx_ls, %__sbx_ll;\n\
    \tadd.u32 %__sbx_ll, %__sbx_ll, %__sbx_z;\n\
    \tadd.u32 %__sbx_ls, %__sbx_ls, %__sbx_z;\n";

/// `%__sbx_a` := the launch's LAUNCH_SKIPS_ENTRY_READ bit (bit 63 of `launch`).
const LAUNCH_SKIPS: &str = "\tshr.u64 %__sbx_a, %__sbx_launch, 63;\n";

/// A device function's local window: the caller's (`llo`, `lhi`, empty when the caller has
/// none) widened by its own frame (`c`, `d`).
const CALLER_LOCALS: &str = "\tsetp.eq.u64 %__sbx_p, %__sbx_llo, %__sbx_lhi;\n\
    \t@%__sbx_p mov.u64 %__sbx_llo, %__sbx_c;\n\
    \t@%__sbx_p mov.u64 %__sbx_lhi, %__sbx_d;\n\
    \tmin.u64 %__sbx_llo, %__sbx_llo, %__sbx_c;\n\
    \tmax.u64 %__sbx_lhi, %__sbx_lhi, %__sbx_d;\n";

/// What begins every prologue of one kind (entry or device function) under one poll
/// interval, as text: the sandbox registers' declarations, and the code that loads the hidden
/// values and derives the launch's epoch, tag and limits from them. Built once per process
/// ([`head`]) rather than emitted again in every function of every module.
#[derive(Clone)]
pub(crate) struct Head {
    poll_interval: u32,
    pub decls: String,
    pub code: String,
}

/// Every [`Head`] there can be: two kinds by the 32 powers of two a poll interval may be
/// (`sandbox` refuses any other interval), each built at its first use.
static HEADS: [[OnceLock<Head>; 32]; 2] = [const { [const { OnceLock::new() }; 32] }; 2];

/// One [`Fx::poll_text`], with the interval it was built for.
type PollText = OnceLock<(u32, Option<String>)>;

/// Every [`Fx::poll_text`]: by the poll interval's power of two, each built at its first use.
static POLLS: [PollText; 32] = [const { OnceLock::new() }; 32];

/// The [`Head`] of an entry's (`is_entry`) or a device function's prologue.
pub(crate) fn head(is_entry: bool, poll_interval: u32) -> Cow<'static, Head> {
    let slot = &HEADS[usize::from(is_entry)][poll_interval.trailing_zeros() as usize % 32];
    let head = slot.get_or_init(|| build_head(is_entry, poll_interval));
    // Only a power of two has its own slot; any other interval gets a head of its own.
    if head.poll_interval == poll_interval {
        Cow::Borrowed(head)
    } else {
        Cow::Owned(build_head(is_entry, poll_interval))
    }
}

fn build_head(is_entry: bool, poll_interval: u32) -> Head {
    let mut decls = String::new();
    let regs = [
        decl("u64", U64_REGS, 0),
        decl("u32", U32_REGS, 0),
        decl("pred", PRED_REGS, 0),
    ];
    // Register declarations always print.
    let _ = super::print::stmts(&mut decls, &regs, 1);
    let mut code = String::new();
    let mut emit = |opcode: &str, mods: &[&str], operands: &[Operand]| {
        emit_line(&mut code, None, opcode, mods, operands);
    };
    for &n in hidden_params(is_entry) {
        let param = Operand::Addr(Some(hidden_param(n)), 0);
        emit("ld", &["param", "u64"], &[sreg(n), param]);
    }
    // Every hidden value the fences, relocated globals and polls trust gets an opaque zero
    // added, so that ptxas cannot prove it warp-uniform and keeps it in vector registers. It
    // keeps a provably uniform value in a uniform register, and it was seen (sessions 30 and
    // 31, docs/ISOLATION.md) letting a divergent sibling path overwrite one that is live in
    // another: a diverged warp runs its paths one after the other, and a uniform register
    // belongs to the whole warp. A limit overwritten that way refused a legal store; a base
    // overwritten that way sent a fenced access to an address of ptxas's choosing.
    // `lanemask_lt & (lanemask_lt + 1)` is 0 in every lane (`2^lane - 1` has no bit in common
    // with `2^lane`), but only a thread's own lane says so.
    let lanemask_lt = Operand::Name("%lanemask_lt".into());
    emit("mov", &["u32"], &[sreg("t"), lanemask_lt]);
    emit("add", &["u32"], &[sreg("z"), sreg("t"), imm(1)]);
    emit("and", &["b32"], &[sreg("z"), sreg("z"), sreg("t")]);
    let zz = Operand::Vec(vec![sreg("z"), sreg("z")]);
    emit("mov", &["b64"], &[sreg("zz"), zz]);
    for &n in hidden_params(is_entry).iter().filter(|&&n| n != "launch") {
        emit("add", &["u64"], &[sreg(n), sreg(n), sreg("zz")]);
    }
    emit("cvt", &["u32", "u64"], &[sreg("epoch"), sreg("launch")]);
    emit("shr", &["u64"], &[sreg("a"), sreg("launch"), imm(32)]);
    emit("cvt", &["u32", "u64"], &[sreg("tag"), sreg("a")]);
    let tag = [sreg("tag"), sreg("tag"), imm(TAG_MASK.into())];
    emit("and", &["b32"], &tag);
    // Every single global access's limit (fence.rs), the same for every width: the largest
    // `x - base` whose access, aligned down to its width (at most MIN_ALIGN), ends in the arena
    // rounded down to MIN_ALIGN. One limit rather than one per width: each is a 64-bit value
    // live in vector registers (above), and ptxas kept them all.
    let align = imm(-(MIN_ALIGN as i64));
    emit("and", &["b64"], &[sreg("lim"), sreg("size"), align]);
    emit("sub", &["u64"], &[sreg("lim"), sreg("lim"), imm(1)]);
    let n = i64::from(poll_interval);
    emit("mov", &["u32"], &[sreg("cnt"), imm(n)]);
    emit("mov", &["u32"], &[sreg("f"), imm(0)]);
    emit("mov", &["u32"], &[sreg("e"), sreg("epoch")]);
    Head {
        poll_interval,
        decls,
        code,
    }
}

/// An entry's count of its launch's start (`CTL_STARTED`, `CTL_STARTED_AT`): each thread with
/// `%tid.x == 0` of a block with `%ctaid.x == 0` (one in a one-dimensional launch;
/// `launch_starts` in any) adds 1 to the launch's counter and stores `%globaltimer` beside it.
/// Every other thread tests `%tid.x | %ctaid.x` (registers a kernel reads anyway) and branches
/// forward past the rest, so the count costs a launch an atomic and a store that nothing waits
/// for, and each thread a compare and a branch.
fn count_start() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(count_start_text)
}

fn count_start_text() -> String {
    let counter_bytes = (i64::from(super::START_COUNTERS) - 1) * 8;
    // `a` := 8 × the counter (bits 48–55 of `launch`), then 4 × it.
    let mut t = String::from(
        "\tmov.u32 %__sbx_t, %tid.x;\n\
         \tmov.u32 %__sbx_o, %ctaid.x;\n\
         \tor.b32 %__sbx_t, %__sbx_t, %__sbx_o;\n\
         \tsetp.ne.u32 %__sbx_q, %__sbx_t, 0;\n\
         \t@%__sbx_q bra $__sbx_counted;\n\
         \tshr.u64 %__sbx_a, %__sbx_launch, 45;\n\
         \tand.b64 %__sbx_a, %__sbx_a, ",
    );
    super::print::int(&mut t, counter_bytes);
    t.push_str(
        ";\n\tadd.u64 %__sbx_b, %__sbx_a, %__sbx_ctl;\n\
         \tmov.u64 %__sbx_x, %globaltimer;\n\
         \tst.volatile.global.u64 [%__sbx_b+",
    );
    super::print::int(&mut t, super::CTL_STARTED_AT);
    t.push_str(
        "], %__sbx_x;\n\
         \tshr.u64 %__sbx_a, %__sbx_a, 1;\n\
         \tadd.u64 %__sbx_a, %__sbx_a, %__sbx_ctl;\n\
         \tred.global.add.u32 [%__sbx_a+",
    );
    super::print::int(&mut t, super::CTL_STARTED);
    t.push_str("], 1;\n$__sbx_counted:\n");
    t
}

/// Room for the statements of a prologue (`Fx::prologue`): its declarations and code are a
/// handful of entries (most of its lines share a text entry).
const PROLOGUE_ROOM: usize = 16;

impl<'m> Fx<'_, 'm> {
    /// Declarations and prologue of a function body.
    pub(crate) fn prologue(&mut self) -> R<Vec<O<'m>>> {
        let line = self.f.line;
        let head = head(self.f.is_entry, self.info.poll_interval);
        // Room for what the rest adds (a few declarations, then `out` appended): grown from
        // one, each list was copied into a larger block on its way.
        let mut decls = Vec::with_capacity(PROLOGUE_ROOM);
        decls.push(O::Text(head.decls.clone()));
        if self.ngroups > 0 {
            for (ty, n) in [("u64", "%__sbx_g"), ("pred", "%__sbx_gq")] {
                decls.push(O::new(Stmt::Reg {
                    ty: ty.into(),
                    names: vec![(n.into(), Some(self.ngroups))],
                    line,
                }));
            }
        }
        // Room for the windows and checks appended to it: an exact copy grew at once, copying
        // the head's whole text.
        let mut code = String::with_capacity(head.code.len() + 1024);
        code.push_str(&head.code);
        // The count of the launch's start, first thing: in the skip copy too unless the copy
        // never polls (see `may_poll`).
        let count_in_copy = self.count_in_copy;
        if count_in_copy {
            code.push_str(count_start());
        }
        let mut out = Vec::with_capacity(PROLOGUE_ROOM / 2);
        out.push(O::Text(code));
        if self.f.is_entry && !count_in_copy {
            out.push(O::Kernel(vec![O::Text(count_start().to_owned())]));
        }
        if self.f.is_entry {
            let mut shared = self.info.tree_shared(self.f.name.as_ref()).into_owned();
            shared.extend(sized(&self.shared_fn));
            self.window(&mut out, &shared, "slo", "shi");
            self.window(&mut out, &sized(&self.locals), "llo", "lhi");
            if self.info.check_arena {
                self.arena_check(&mut out);
            }
            // Poll once at entry: a launch queued behind an abort never starts its work. The
            // epoch is read here and compared before the first instruction that could write
            // memory, branch or sync (`entry_check`), so its latency overlaps the kernel's own
            // parameter and address arithmetic and first loads instead of preceding them.
            // The skip copy leaves the read out (`O::Kernel`): its `%__sbx_e` keeps the
            // launch's epoch, and its first poll reads the block's.
            if self.has_copy {
                let mut read = Vec::new();
                self.entry_read(&mut read);
                out.push(O::Kernel(read));
            } else {
                self.entry_read(&mut out);
            }
        } else if !self.locals.is_empty() {
            // The local window is the caller's (pointers to its locals may be passed in)
            // together with this function's own frame.
            self.window(&mut out, &sized(&self.locals), "c", "d");
            Self::with_text(&mut out, |t| put(t, CALLER_LOCALS));
        }
        if !self.f.is_entry {
            // Every call polls at its callee's entry. Counting back-edges alone is not enough:
            // the count starts afresh in each activation, so loops of fewer than
            // `poll_interval` iterations, nested through calls, never poll at all, and a
            // straight path of calls can repeat work exponentially in the call depth (the
            // red-team tests in ptxvm's tests/all/calls.rs).
            self.exit_if_aborted(&mut out);
        }
        self.window_limits(&mut decls, &mut out, line);
        decls.append(&mut out);
        Ok(decls)
    }

    /// Whether this function (its body rewritten, so its polls are known; an entry's own read
    /// at entry is not one, since its skip copy leaves it out), or one it calls, may poll:
    /// a thread of an entry that may not runs a bounded straight path and ends, whatever the
    /// epoch. Its skip copy then counts no start: a launch of it can neither run long nor be
    /// stopped, so the watchdog has nothing to tell, and the count (a first access to the
    /// control block, in a kernel that otherwise never touches it) cost the shortest kernels
    /// about 0.07 µs graph-replayed on the H100 (session 44).
    pub(crate) fn may_poll(&self) -> bool {
        self.polls.get()
            || self.info.tree(self.f.name.as_ref())[1..]
                .iter()
                .any(|c| !self.info.lean.contains(c))
    }

    /// The 32-bit forms of the windows that `window_into` checks against: their low ends and,
    /// per span checked, the count of in-window start offsets (0 when the span does not fit).
    /// Their registers are declared right after the head's (`decls[0]`).
    fn window_limits(&self, decls: &mut Vec<O<'m>>, out: &mut Vec<O<'m>>, line: u32) {
        let spans = self.spans.borrow().clone();
        if spans.is_empty() {
            return;
        }
        // Span 0 marks a window whose counts are immediates: only its start is needed.
        let counted: Vec<(bool, u64)> = spans.iter().copied().filter(|s| s.1 > 0).collect();
        let names: Vec<String> = counted
            .iter()
            .map(|&(sh, n)| format!("{}n{n}", if sh { 's' } else { 'l' }))
            .collect();
        if !names.is_empty() {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            decls.insert(1, O::new(decl("u32", &refs, line)));
        }
        // Per-thread, as the head's hidden values are (`build_head`): an entry's window is the
        // addresses of its variables, which ptxas would otherwise hold in a uniform register.
        for (sh, limits) in [(true, SHARED_LIMITS), (false, LOCAL_LIMITS)] {
            if spans.iter().any(|s| s.0 == sh) {
                Self::with_text(out, |t| put(t, limits));
            }
        }
        // `%__sbx_<name>` := max(size + 1, span) - span: the window's count for that span.
        for (name, &(sh, span)) in names.iter().zip(&counted) {
            Self::with_text(out, |t| {
                // `\top %__sbx_<name>, src, k;`
                let line = |t: &mut String, op: &str, src: &str, k: i64| {
                    t.push('\t');
                    put(t, op);
                    put(t, " %__sbx_");
                    put(t, name);
                    put(t, ", ");
                    put(t, src);
                    put(t, ", ");
                    super::print::int(t, k);
                    put(t, ";\n");
                };
                let me = format!("%__sbx_{name}");
                line(t, "add.u32", if sh { "%__sbx_ss" } else { "%__sbx_ls" }, 1);
                line(t, "max.u32", &me, span as i64);
                line(t, "sub.u32", &me, span as i64);
            });
        }
        let targets = self.targets.borrow().clone();
        if !targets.is_empty() {
            let names: Vec<String> = targets.iter().map(|w| format!("st{w}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            decls.insert(1, O::new(decl("u64", &refs, line)));
        }
        self.redirect_targets(out);
    }

    /// `[lo, hi)` := the hull of the variables' addresses (empty `[0, 0)` when none); a
    /// dynamic variable (`None`) extends to its address plus `%dynamic_smem_size`.
    fn window(&self, out: &mut Vec<O<'m>>, vars: &[(&str, Option<u64>)], lo: &str, hi: &str) {
        // `op %__sbx_<d>, a, b;` and its line's end: `a` and `b` are written as they are.
        fn line(t: &mut String, op: &str, d: &str, a: &str, b: Option<&str>) {
            t.push('\t');
            put(t, op);
            put(t, " %__sbx_");
            put(t, d);
            put(t, ", ");
            put(t, a);
            if let Some(b) = b {
                put(t, ", ");
                put(t, b);
            }
            put(t, ";\n");
        }
        Self::with_text(out, |t| {
            if vars.is_empty() {
                line(t, "mov.u64", lo, "0", None);
                line(t, "mov.u64", hi, "0", None);
                return;
            }
            let (lo_r, hi_r) = (sreg_name(lo), sreg_name(hi));
            for (k, (name, size)) in vars.iter().enumerate() {
                // First variable initialises the window; later ones widen it.
                let (dl, dh) = if k == 0 { (lo, hi) } else { ("a", "b") };
                let dl_r = if k == 0 { &*lo_r } else { "%__sbx_a" };
                line(t, "mov.u64", dl, name, None);
                match size {
                    Some(s) => {
                        put(t, "\tadd.u64 %__sbx_");
                        put(t, dh);
                        put(t, ", ");
                        put(t, dl_r);
                        put(t, ", ");
                        super::print::int(t, *s as i64);
                        put(t, ";\n");
                    }
                    None => {
                        put(t, "\tmov.u32 %__sbx_t, %dynamic_smem_size;\n");
                        line(t, "cvt.u64.u32", dh, "%__sbx_t", None);
                        let dh_r = if k == 0 { &*hi_r } else { "%__sbx_b" };
                        line(t, "add.u64", dh, dh_r, Some(dl_r));
                    }
                }
                if k > 0 {
                    line(t, "min.u64", lo, &lo_r, Some("%__sbx_a"));
                    line(t, "max.u64", hi, &hi_r, Some("%__sbx_b"));
                }
            }
        });
    }

    /// Counts a taken back-edge down (by its weight: the bounded loops inside it count too);
    /// when the count reaches zero or below the thread resets it, reads the epoch and, if it
    /// changed, branches to a stop path (report.rs). The poll sits inline behind a forward
    /// branch (three instructions in the loop when not polling): out of line, a poll that found
    /// its launch running would branch back, and ptxvm's divergent warps would run on without
    /// the polling lanes, breaking warp-synchronous code after the loop. What a stopped thread
    /// does (store its tag and fault word, then leave) never comes back, and sits out of the
    /// loop, so that ptxas compiles the loop as if it were not there.
    ///
    /// A guarded back-edge is counted, and then taken, on a copy of its guard (`%__sbx_bp`),
    /// which the caller puts on the branch in place of the user's predicate (the returned
    /// guard). With the user's predicate both counted and branched on across the poll, NVIDIA's
    /// JIT (CUDA 13.0, -O1 and up) miscompiled loops in generated programs: an instruction in a
    /// loop guarded by the loop's own back-edge predicate never ran, where -O0, ptxvm and the
    /// program as written all ran it (bench/h200-runs/2026-12-04-s26/, seed 297).
    ///
    /// A thread stopped at a guarded back-edge leaves its loop rather than exiting there: its
    /// stop path (the returned label, which the caller places with [`Self::leave_loop`] right
    /// after the branch) clears its count (every later back-edge polls again, and leaves its
    /// loop too) and falls into the code after the loop, so it runs forward to the kernel's
    /// end, or to a poll that exits. NVIDIA's JIT (CUDA 13.0, -O2 and up) miscompiled a
    /// generated program whose polled loop could `exit` there: threads took the wrong arm of a
    /// later `brx.idx`, where -O0, -O1, ptxvm, the program as written, and the same rewrite
    /// without that one `exit` were all right (bench/h200-runs/2026-12-04-s28/seed57/, seed
    /// 57). Forward progress is bounded: every backward branch of the function polls (or
    /// belongs to a bounded loop).
    pub(crate) fn backedge(
        &mut self,
        i: &Inst<'m>,
        out: &mut Vec<O<'m>>,
    ) -> Option<((Str<'m>, bool), u32)> {
        let weight = self
            .backedges
            .weight
            .get(&(i as *const Inst))
            .copied()
            .unwrap_or(1);
        let Some((g, neg)) = i.guard.as_ref() else {
            self.count_down(None, weight, out);
            return None;
        };
        Self::text(out, None, |t| {
            let heads = ["mov.pred %__sbx_bp, ", "not.pred %__sbx_bp, "];
            ending_in(t, heads[usize::from(*neg)], g);
        });
        let copy = (Str::borrowed("%__sbx_bp"), false);
        let stop = self.label_number();
        self.count_down_then(Some(copy.clone()), weight, Some(stop), out);
        Some((copy, stop))
    }

    /// Counts `weight` back-edges down when `guard` holds (a branch taken, a call made), and
    /// polls when the count reaches zero or below; a stopped thread exits through the
    /// function's stop block (see [`Self::backedge`]).
    pub(crate) fn count_down(
        &mut self,
        guard: Option<(Str<'m>, bool)>,
        weight: u32,
        out: &mut Vec<O<'m>>,
    ) {
        self.stops.set(true);
        self.count_down_then(guard, weight, None, out);
    }

    /// [`Self::count_down`], a stopped thread branching to `stop` (see [`branch_if_stopped`]).
    fn count_down_then(
        &mut self,
        guard: Option<(Str<'m>, bool)>,
        weight: u32,
        stop: Option<u32>,
        out: &mut Vec<O<'m>>,
    ) {
        Self::text(out, guard.as_ref(), |t| {
            put(t, "sub.s32 %__sbx_cnt, %__sbx_cnt, ");
            super::print::unsigned(t, weight.into());
            // skip := cnt > 0 || the branch is not taken.
            match &guard {
                None => put(t, ";\n\tsetp.gt.s32 %__sbx_p, %__sbx_cnt, 0;\n"),
                Some((g, neg)) => {
                    let not_taken = if *neg { ", " } else { ", !" };
                    put(t, ";\n\tsetp.gt.or.s32 %__sbx_p, %__sbx_cnt, 0");
                    ending_in(t, not_taken, g);
                }
            }
        });
        let skip = self.label();
        Self::text(out, None, |t| {
            put(t, "@%__sbx_p bra ");
            put(t, &skip);
            put(t, ";\n");
        });
        match self.poll_text() {
            Some(text) => {
                self.polls.set(true);
                Self::with_text(out, |t| put(t, text));
            }
            None => self.poll(out),
        }
        branch_if_stopped(out, stop);
        out.push(O::new(Stmt::Label(skip.into(), self.line)));
    }

    /// The poll a count that ran out makes: the count reset, the epoch read and compared
    /// (`%__sbx_p`: stopped); the branch to the stop path follows.
    fn poll(&self, out: &mut Vec<O<'m>>) {
        let n = i64::from(self.info.poll_interval);
        self.emit(out, None, "mov", &["u32"], &[sreg("cnt"), imm(n)]);
        self.read_epoch(out);
        Self::with_text(out, |t| put(t, STOPPED));
    }

    /// [`Self::poll`] as text, built once per process for each power-of-two poll interval
    /// (`sandbox` refuses any other) rather than printed again at every back-edge; `None` for
    /// an interval without its own slot.
    fn poll_text(&self) -> Option<&'static str> {
        let n = self.info.poll_interval;
        let slot = &POLLS[n.trailing_zeros() as usize % 32];
        let (built_for, text) = slot.get_or_init(|| {
            let mut made = Vec::with_capacity(1);
            self.poll(&mut made);
            // Instructions only, so one text; anything else is printed each time instead.
            let text = match made.as_slice() {
                [O::Text(t)] => Some(t.clone()),
                _ => None,
            };
            (n, text)
        });
        text.as_deref().filter(|_| *built_for == n)
    }

    /// The poll at a device function's entry: reads the control block's epoch and, when it is
    /// not this launch's (the host bumped it to stop the guest's work), exits through the
    /// function's stop block, which reports the stop (report.rs).
    fn exit_if_aborted(&self, out: &mut Vec<O<'m>>) {
        self.read_epoch(out);
        Self::with_text(out, |t| put(t, STOPPED));
        branch_if_stopped(out, None);
        self.stops.set(true);
    }

    /// The entry's read of the abort epoch, in the form its kind of kernel takes.
    fn entry_read(&mut self, out: &mut Vec<O<'m>>) {
        if self.info.loop_free(self.f) {
            self.loop_free_entry_read(out);
        } else if self.info.may_skip_entry_read(self.f) {
            self.skippable_entry_read(out);
        } else {
            self.read_epoch(out);
        }
    }

    /// A loop-free kernel's entry read, which a launch skips when it says so
    /// (LAUNCH_SKIPS_ENTRY_READ): `%__sbx_e` then keeps the launch's own epoch, so the compare
    /// passes. With `Policy::early_loop_free_check`, a uniform branch (the flag is a kernel
    /// parameter) jumps over the read and an immediate compare; else the read is predicated and
    /// the compare deferred, as in looping kernels.
    fn loop_free_entry_read(&mut self, out: &mut Vec<O<'m>>) {
        if self.info.early_check {
            let over = self.skip_read_over(out);
            self.read_epoch(out);
            self.entry_check(out);
            out.push(O::new(Stmt::Label(over.into(), self.line)));
        } else {
            Self::with_text(out, |t| {
                put(t, LAUNCH_SKIPS);
                put(t, "\tsetp.eq.u64 %__sbx_q, %__sbx_a, 0;\n");
            });
            self.read_epoch_if(out, Some(("%__sbx_q".into(), false)));
        }
    }

    /// A looping kernel's entry read, which a launch skips when it says so: a uniform branch
    /// over the read, whose compare stays where it was (before the first store), so `%__sbx_e`
    /// keeps the launch's own epoch and the compare passes. The thread then stops at its first
    /// poll instead (`Info::first_poll_span` bounds the work until then).
    fn skippable_entry_read(&mut self, out: &mut Vec<O<'m>>) {
        let over = self.skip_read_over(out);
        self.read_epoch(out);
        out.push(O::new(Stmt::Label(over.into(), self.line)));
    }

    /// The uniform branch past the entry's read that a launch which skips it takes: to the
    /// label returned, which the caller places after the read.
    fn skip_read_over(&mut self, out: &mut Vec<O<'m>>) -> String {
        let over = self.label();
        Self::with_text(out, |t| {
            put(t, LAUNCH_SKIPS);
            put(
                t,
                "\tsetp.ne.u64 %__sbx_q, %__sbx_a, 0;\n\t@%__sbx_q bra.uni ",
            );
            put(t, &over);
            put(t, ";\n");
        });
        over
    }

    /// `%__sbx_e` := the control block's epoch.
    fn read_epoch(&self, out: &mut Vec<O<'m>>) {
        self.read_epoch_if(out, None);
    }

    /// [`Self::read_epoch`] under `guard`.
    fn read_epoch_if(&self, out: &mut Vec<O<'m>>, guard: Option<(Str<'m>, bool)>) {
        self.polls.set(true);
        Self::text(out, guard.as_ref(), |t| {
            put(t, "ld.volatile.global.u32 %__sbx_e, ");
            ctl_word(t, super::CTL_EPOCH);
            put(t, ";\n");
        });
    }

    /// `Policy::check_arena_at_entry`: an arena smaller than MIN_ARENA cannot hold any access
    /// (group fences span up to 4 KiB), and one whose base is not MIN_ALIGN-aligned would let
    /// an aligned-down address fall below it: the launch reports a fenced access and does
    /// nothing.
    fn arena_check(&self, out: &mut Vec<O<'m>>) {
        self.emit(
            out,
            None,
            "and",
            &["b64"],
            &[sreg("a"), sreg("base"), imm(MIN_ALIGN as i64 - 1)],
        );
        self.emit(
            out,
            None,
            "setp",
            &["ne", "u64"],
            &[sreg("p"), sreg("a"), imm(0)],
        );
        self.emit(
            out,
            None,
            "setp",
            &["lt", "or", "u64"],
            &[sreg("p"), sreg("size"), imm(MIN_ARENA as i64), sreg("p")],
        );
        self.fault_now(out, Some(("%__sbx_p".into(), false)));
        self.emit(out, Some(("%__sbx_p".into(), false)), "exit", &[], &[]);
    }

    /// The entry's deferred epoch check: exits when the epoch read in the prologue is not this
    /// launch's. Nothing to report: the thread has done nothing that outlives the launch.
    pub(crate) fn entry_check(&self, out: &mut Vec<O<'m>>) {
        Self::with_text(out, |t| {
            put(t, STOPPED);
            put(t, "\t@%__sbx_p exit;\n");
        });
    }
}

/// The tag's bits in the launch parameter's high word (its bits 32–47): the start counter and
/// LAUNCH_SKIPS_ENTRY_READ follow, not part of the tag. The prologue and a stop's report (report.rs)
/// both derive the tag with it.
pub(super) const TAG_MASK: u32 = super::MAX_TAG;

/// `%__sbx_p` := whether `%__sbx_e` is not this launch's epoch (the launch was stopped).
const STOPPED: &str = "\tsetp.ne.u32 %__sbx_p, %__sbx_e, %__sbx_epoch;\n";

/// `@%__sbx_p bra <stop>;`: a stopped thread's branch to its stop path (report.rs): the
/// function's stop block, or the block `$__sbx_L<n>` past a guarded back-edge.
fn branch_if_stopped(out: &mut Vec<O<'_>>, stop: Option<u32>) {
    Fx::with_text(out, |t| {
        put(t, "\t@%__sbx_p bra ");
        super::report::stop_label(t, stop);
        put(t, ";\n");
    });
}

/// `head`, then `last` as the line's last operand, and the line's end.
fn ending_in(t: &mut String, head: &str, last: &str) {
    put(t, head);
    put(t, last);
    put(t, ";\n");
}

/// `[%__sbx_ctl+off]`, the control block's word at `off`, as `print::parts` writes it.
pub(super) fn ctl_word(t: &mut String, off: i64) {
    put(t, "[%__sbx_ctl");
    if off != 0 {
        t.push('+');
        super::print::int(t, off);
    }
    t.push(']');
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_poll_interval_gets_a_head_that_counts_it() {
        // 1 and 3 share a slot: whichever comes second gets a head of its own.
        for (is_entry, n) in [
            (true, 1024),
            (false, 1024),
            (true, 1),
            (true, 3),
            (false, 1 << 31),
        ] {
            let h = super::head(is_entry, n);
            assert!(
                h.code.contains(&format!("mov.u32 %__sbx_cnt, {n};\n")),
                "{n}"
            );
            assert_eq!(h.code.contains("__gpuhost_sbx_slo"), !is_entry);
        }
    }
}
