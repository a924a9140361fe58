//! Rewrites one function: appends the hidden parameters, adds the sandbox registers and the
//! prologue, passes the hidden values on at every call, and sends each instruction to `fence`
//! (memory), `poll` (back-edges) or through unchanged after the allow-list check.

use super::hash::{HashMap, HashMapExt};
use super::put::put;

use super::allow::{Info, call_parts};
use super::names::NameMap;
use super::params::{call_param, hidden_params, param_decl};
use super::print::O;
use super::statics::Flat;
use crate::ast::{Func, Inst, Operand, Space, Stmt, Str};
use crate::error::Error;
use crate::isa::{Opcode, Sandbox};
use crate::lower::var_size;

pub(crate) type R<T> = Result<T, Error>;

/// Register `%__sbx_<n>`.
pub(crate) fn sreg(n: &str) -> Operand<'static> {
    Operand::Name(super::poll::sreg_name(n))
}

/// `prefix` then `n` in decimal, as `format!("{prefix}{n}")` spells it: the rewrite names a
/// register or label so for every group, window count and poll, and the formatting machinery
/// cost several times the rest.
/// What the rewriter's own labels start with (`Fx::label`); `$__sbx_` names are reserved.
pub(super) const LABEL: &str = "$__sbx_L";

pub(crate) fn numbered(prefix: &str, n: u64) -> String {
    // Sized exactly: thousands of these names live until the module is printed.
    let digits = n.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut s = String::with_capacity(prefix.len() + digits);
    s.push_str(prefix);
    super::print::unsigned(&mut s, n);
    s
}

/// Prints a new instruction as one line of `t`.
pub(crate) fn emit_line(
    t: &mut String,
    guard: Option<&(Str<'_>, bool)>,
    opcode: &str,
    mods: &[&str],
    operands: &[Operand],
) {
    t.push('\t');
    // Only texture operands fail to print (the line is only for that error), and the
    // allow-list refused those already.
    let _ = super::print::parts(t, guard, opcode, mods, operands, None, 0);
    t.push('\n');
}

pub(crate) fn imm(v: i64) -> Operand<'static> {
    Operand::Int(v)
}

/// One function being rewritten.
pub(crate) struct Fx<'a, 'm> {
    pub info: &'a Info<'m>,
    pub f: &'m Func<'m>,
    /// Rewritten as a lean function: it keeps no count, so its lean calls count nothing (its
    /// span bounds it). `lean::reads_hidden` asks this of every candidate.
    lean: bool,
    /// An entry that has a skip copy (`SandboxedKernel::skip_copy`): the copy shares its
    /// prologue but for the epoch read at entry, which goes in an `O::Kernel` (the copy, like
    /// the compares before the first store, leaves it out; its loops and callees poll as usual).
    pub has_copy: bool,
    /// Register name → type, for exact names; `%r<5>` ranges as prefix → (count, type).
    regs: NameMap<'m, &'m str>,
    ranges: NameMap<'m, (u32, &'m str)>,
    /// This function's `.local` variables → size.
    pub locals: HashMap<&'m str, u64>,
    /// This entry's function-scope `.shared` variables → size.
    pub shared_fn: HashMap<&'m str, u64>,
    /// `.param` names visible here → size.
    pub params: HashMap<&'m str, u64>,
    /// Position (in statement order) of every label, and the branch tables.
    pub(super) labels: HashMap<&'m str, usize>,
    pub(super) tables: HashMap<&'m str, &'m [Str<'m>]>,
    pub(super) pos: usize,
    nlabel: u32,
    /// Accesses whose fence an earlier access of their run emitted.
    pub members: HashMap<*const Inst<'m>, super::group::Member<'m>>,
    /// Group registers used so far.
    pub ngroups: u32,
    /// The later accesses of the run `group` is gathering (reused from run to run).
    pub(super) run: Vec<(&'m Inst<'m>, i64, usize)>,
    /// Line of the instruction being rewritten (new instructions carry it).
    pub line: u32,
    /// Back-edges of counted loops (no poll) and the weights of the others.
    pub backedges: super::bounded::BackEdges<'m>,
    /// (shared?, span) of every window check emitted: the prologue computes their limits.
    pub spans: std::cell::RefCell<std::collections::BTreeSet<(bool, u64)>>,
    /// Widths of shared atomics redirected to `%__sbx_st<w>` (window.rs, `windowed`).
    pub targets: std::cell::RefCell<std::collections::BTreeSet<u64>>,
    /// Registers that only hold known addresses in this function's `.local` variables.
    pub statics: HashMap<&'m str, super::statics::Static<'m>>,
    /// This function's `.local` variables → (size, alignment), in a short list: `static_local`
    /// asks it of nearly every `.local` access, and a function has a few such variables
    /// (nvcc's one depot).
    pub local_vars: NameMap<'m, (u64, u64)>,
    /// This function's `.shared` variables → alignment.
    pub shared_align: HashMap<&'m str, u64>,
    /// Registers that only hold bounded offsets into static variables (bounds.rs).
    pub bounds: super::bounds::Bounds<'m>,
    /// By statement position, whether it lies between some backward branch and its target
    /// (`in_loop`): asked of every access, so laid out once rather than searched each time
    /// (a search over every loop made a body of many loops quadratic to rewrite).
    pub looped: Vec<bool>,
    /// Those of them an access was left unchecked for (`range_inits` gives them a value).
    pub unchecked: std::cell::RefCell<std::collections::BTreeSet<&'m str>>,
    /// Whether the body notes fenced accesses in `%__sbx_f` (reported at `ret`/`exit`).
    pub deferred: std::cell::Cell<bool>,
    /// Whether the reports before its returns print (`O::Report`; set by `add_reports`).
    pub reports: std::rc::Rc<std::cell::Cell<bool>>,
    /// Whether some poll branches to the function's stop block (report.rs, `stop_block`).
    pub stops: std::cell::Cell<bool>,
    /// Whether the function reads the abort epoch anywhere (`Fx::read_epoch_if`).
    pub polls: std::cell::Cell<bool>,
    /// An entry whose skip copy counts its launch's start too (`Fx::may_poll`, decided once
    /// the body is rewritten, before the prologue's own read).
    pub count_in_copy: bool,
    /// In an entry: the epoch the prologue read is compared (`entry_check`) only where the
    /// first instruction with an effect beyond the thread's registers is reached on some path
    /// without a compare, not at once (`defer_step`).
    pub defer_check: bool,
    /// Where the walk stands in placing that compare (defer.rs).
    pub(super) defer: super::defer::Deferral<'m>,
    /// The top-level declarations `start` hoists (`hoisted`), in order: noted by `scan`, which
    /// walks the body anyway, rather than found by a second walk.
    hoisted: Vec<&'m Stmt<'m>>,
}

/// A rewritten function. Its header is the function's own with the hidden parameters after
/// the user's (printed from the function itself: built as a new `Func`, its parameters,
/// linkage and directives were cloned only to be printed). Its skip copy, when it has one, is
/// the same but for its name and for what only the kernel prints (`O::Kernel`: the entry's
/// epoch read and deferred compares) and what only the copy prints (`O::Copy`).
pub(crate) struct Rewritten<'m> {
    /// The hidden values its header takes after its own parameters (`hidden_params`; none for
    /// a lean function).
    pub hidden: &'static [&'static str],
    /// For a definition: the declarations, prologue and static registers, then the body.
    pub body: Option<(Vec<O<'m>>, Vec<O<'m>>)>,
    /// An entry's skip copy counts its launch's start (`SandboxedKernel::copy_counts_start`).
    pub copy_counts_start: bool,
}

/// Rewrites a function (entry, device function or prototype). A lean device function
/// (`Info::lean`) keeps its signature and gets no prologue: it reads no hidden value.
///
/// With `copy_as`, also an entry's skip copy under that name (`SandboxedKernel::skip_copy`).
/// The two differ only in the kernel's epoch read at entry and the compares it defers into its
/// body, so the prologue and body are rewritten once for both.
pub(crate) fn func<'m>(
    info: &Info<'m>,
    f: &'m Func<'m>,
    copy_as: Option<&str>,
) -> R<Rewritten<'m>> {
    let lean = !f.is_entry && info.lean.contains(f.name.as_ref());
    let hidden = if lean { &[] } else { hidden_params(f.is_entry) };
    let Some(b) = &f.body else {
        return Ok(Rewritten {
            hidden,
            body: None,
            copy_counts_start: false,
        });
    };
    let (mut fx, mut body) = rewrite_body(info, f, b, lean)?;
    fx.has_copy = copy_as.is_some();
    fx.count_in_copy = f.is_entry && fx.may_poll();
    let copy_counts_start = fx.count_in_copy;
    let start = fx.start()?;
    fx.stop_block(&mut body);
    Ok(Rewritten {
        hidden,
        body: Some((start, body)),
        copy_counts_start,
    })
}

/// Top-level register and .local/.shared declarations go first: the prologue takes the
/// variables' addresses, and declarations then precede every instruction.
fn hoisted(s: &Stmt) -> bool {
    match s {
        Stmt::Var(v) => matches!(v.space, Space::Local | Space::Shared),
        Stmt::Reg { .. } => true,
        _ => false,
    }
}

/// Rewrites the statements of `f`'s body `b` (without the hoisted declarations and the
/// prologue), as a lean function's or not.
pub(super) fn rewrite_body<'a, 'm>(
    info: &'a Info<'m>,
    f: &'m Func<'m>,
    b: &'m [Stmt<'m>],
    lean: bool,
) -> R<(Fx<'a, 'm>, Vec<O<'m>>)> {
    let mut fx = Fx {
        info,
        f,
        lean,
        has_copy: false,
        regs: NameMap::default(),
        ranges: NameMap::default(),
        locals: HashMap::new(),
        shared_fn: HashMap::new(),
        params: HashMap::new(),
        labels: HashMap::new(),
        tables: HashMap::new(),
        pos: 0,
        nlabel: 0,
        members: HashMap::new(),
        ngroups: 0,
        run: Vec::new(),
        line: f.line,
        backedges: Default::default(),
        spans: Default::default(),
        targets: Default::default(),
        statics: HashMap::new(),
        local_vars: NameMap::default(),
        shared_align: HashMap::new(),
        bounds: Default::default(),
        unchecked: Default::default(),
        looped: Vec::new(),
        deferred: Default::default(),
        reports: Default::default(),
        stops: Default::default(),
        polls: Default::default(),
        count_in_copy: false,
        defer_check: false,
        defer: Default::default(),
        // Room for nvcc's usual few (its `.reg` lines and a `.local` depot): grown from
        // empty, the list was copied twice on its way there.
        hoisted: Vec::with_capacity(8),
    };
    // Sized once: grown from empty, each function's map rehashed on its way to its size.
    fx.params.reserve(f.params.len() + f.rets.len());
    for p in f.params.iter().chain(&f.rets) {
        fx.params.insert(p.name.as_ref(), var_size(p)?.0);
    }
    // Sized from the allow-list's counts (`Info::counts`): grown, they rehashed every name.
    let [regs, ranges, labels] = info.counts(f);
    fx.regs.reserve(regs);
    fx.ranges.reserve(ranges);
    fx.labels.reserve(labels);
    let mut flat = Flat::with_capacity(b.len());
    fx.scan(b, 0, &mut flat)?;
    fx.backedges = info.back_edges(f);
    fx.statics = super::statics::analyse(&flat, &fx.locals, |r| {
        matches!(fx.reg_ty(r), Some("u64" | "b64" | "s64"))
    });
    let vars = fx.locals.keys().chain(fx.shared_fn.keys()).copied();
    let module_shared = info
        .shared
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(n, _)| *n);
    fx.bounds = super::bounds::analyse(flat, vars.chain(module_shared).collect());
    let loops = info.loops(f);
    fx.looped = super::bounded::looped(&loops);
    fx.pos = 0;
    let mut body = Vec::with_capacity(2 * b.len());
    fx.defer_check = f.is_entry && !(info.early_check && info.loop_free(f));
    if fx.defer_check {
        fx.defer = super::defer::Deferral::new(&loops);
    }
    fx.stmts(b, true, &mut body)?;
    fx.add_reports(&mut body);
    Ok((fx, body))
}

impl<'m> Fx<'_, 'm> {
    /// Whether the statement at `pos` lies between some loop's header and its back-edge.
    pub(crate) fn in_loop(&self) -> bool {
        self.looped.get(self.pos).copied().unwrap_or(false)
    }

    /// First pass: declarations and label positions; and, into `flat`, the instructions in
    /// order and the registers that nested blocks declare (`depth`: how deep `body` is).
    fn scan(&mut self, body: &'m [Stmt<'m>], depth: u32, flat: &mut Flat<'m>) -> R<()> {
        for s in body {
            if depth == 0 && hoisted(s) {
                self.hoisted.push(s);
            }
            match s {
                Stmt::Reg { ty, names, .. } => {
                    if depth > 0 {
                        flat.nested
                            .extend(names.iter().map(|(n, c)| (n.as_ref(), *c)));
                    }
                    for (n, range) in names {
                        match range {
                            None => self.regs.insert(n.as_ref(), ty.as_ref()),
                            Some(c) => self.ranges.insert(n.as_ref(), (*c, ty.as_ref())),
                        }
                    }
                }
                Stmt::Var(v) => {
                    let (size, align) = if v.count == Some(0) {
                        (0, 1)
                    } else {
                        var_size(v)?
                    };
                    match v.space {
                        Space::Local => {
                            self.locals.insert(v.name.as_ref(), size);
                            self.local_vars
                                .insert(v.name.as_ref(), (size, u64::from(align)));
                        }
                        Space::Shared => {
                            self.shared_align.insert(v.name.as_ref(), u64::from(align));
                            self.shared_fn.insert(v.name.as_ref(), size);
                        }
                        Space::Param => drop(self.params.insert(v.name.as_ref(), size)),
                        _ => {}
                    }
                }
                Stmt::Label(l, _) => {
                    self.labels.insert(l.as_ref(), self.pos);
                    self.pos += 1;
                }
                Stmt::Targets(n, ls, _) => drop(self.tables.insert(n.as_ref(), ls.as_slice())),
                Stmt::Inst(i) => {
                    flat.insts.push(i);
                    self.pos += 1;
                }
                Stmt::Block(b) => self.scan(b, depth + 1, flat)?,
            }
        }
        Ok(())
    }

    /// What precedes the rewritten body: the hoisted declarations, the prologue (none for a
    /// lean function) and the static and bounded registers' values.
    fn start(&mut self) -> R<Vec<O<'m>>> {
        let prologue = if self.lean {
            Vec::new()
        } else {
            self.prologue()?
        };
        // Room for the inits' text too: grown for the prologue alone, it grew again for them.
        let mut out: Vec<O<'m>> = Vec::with_capacity(self.hoisted.len() + prologue.len() + 2);
        out.extend(self.hoisted.iter().map(|&s| O::Stmt(s)));
        out.extend(prologue);
        self.static_inits(&mut out);
        self.range_inits(&mut out);
        Ok(out)
    }

    /// Sets every static register to one of its values before the body runs (statics.rs).
    fn static_inits(&self, out: &mut Vec<O<'m>>) {
        let mut regs: Vec<_> = self.statics.iter().collect();
        regs.sort_by_key(|(r, _)| *r);
        for (r, st) in regs {
            let k = st.offsets.first().copied().unwrap_or(0);
            self.set_to_var_plus(out, r, "u64", st.var, k);
        }
    }

    /// `r` := the address of variable `var` plus `k`, in a `ty` (`u32` or `u64`) register.
    pub(super) fn set_to_var_plus(
        &self,
        out: &mut Vec<O<'m>>,
        r: &str,
        ty: &str,
        var: &str,
        k: i64,
    ) {
        // Written as `emit` would print `mov.<ty> r, var;` and `add.<ty> r, r, k;` (every
        // statics.rs and bounds.rs register gets them at entry), without building operands.
        Self::with_text(out, |t| {
            let head = |t: &mut String, op: &str| {
                t.push('\t');
                put(t, op);
                t.push('.');
                put(t, ty);
                t.push(' ');
                put(t, r);
                put(t, ", ");
            };
            head(t, "mov");
            put(t, var);
            put(t, ";\n");
            if k != 0 {
                head(t, "add");
                put(t, r);
                put(t, ", ");
                super::print::int(t, k);
                put(t, ";\n");
            }
        });
    }

    /// Whether a `.local` access of `w` bytes at `[r + off]` stays inside the variable `r`
    /// points into, aligned, whatever `r` holds (statics.rs).
    pub(crate) fn static_local(&self, r: &str, off: i64, w: u64) -> bool {
        let Some(st) = self.statics.get(r) else {
            return false;
        };
        let Some(&(size, align)) = self.local_vars.get(st.var) else {
            return false;
        };
        let w = w as i64;
        align >= w as u64
            && st.offsets.iter().all(|k| {
                k.checked_add(off).is_some_and(|a| {
                    a >= 0 && a % w == 0 && a.checked_add(w).is_some_and(|e| e as u64 <= size)
                })
            })
    }

    /// Type of register `name` (`u32`, `b64`, …), if declared.
    pub(crate) fn reg_ty(&self, name: &str) -> Option<&'m str> {
        if let Some(t) = self.regs.get(name) {
            return Some(t);
        }
        // The number a range's name ends in, read in the one walk that finds where it starts
        // (as `str::parse` reads it: leading zeros allowed, none past `u32::MAX`).
        let b = name.as_bytes();
        let mut at = b.len();
        while at > 0 && b[at - 1].is_ascii_digit() {
            at -= 1;
        }
        if at == b.len() {
            return None;
        }
        let n = b[at..].iter().try_fold(0u32, |n, &c| {
            n.checked_mul(10)?.checked_add(u32::from(c - b'0'))
        })?;
        // The digits are ASCII: `at` is a character boundary.
        let prefix = &name[..at];
        match self.ranges.get(prefix) {
            Some(&(c, t)) if n < c => Some(t),
            _ => None,
        }
    }

    /// A fresh label name.
    pub(crate) fn label(&mut self) -> String {
        numbered(LABEL, self.label_number().into())
    }

    /// A fresh label's number: `$__sbx_L<n>`, for a label written straight into text.
    pub(crate) fn label_number(&mut self) -> u32 {
        self.nlabel += 1;
        self.nlabel
    }

    /// Appends a new instruction (at the current source line).
    pub(crate) fn emit(
        &self,
        out: &mut Vec<O<'m>>,
        guard: Option<(Str<'m>, bool)>,
        opcode: &str,
        mods: &[&str],
        operands: &[Operand],
    ) {
        // Consecutive new instructions share one text buffer: one allocation for many lines.
        Self::with_text(out, |t| {
            emit_line(t, guard.as_ref(), opcode, mods, operands)
        });
    }

    /// What `f` emits, on its own (for `O::Kernel` and `O::Copy`).
    pub(super) fn emitted(&self, f: impl FnOnce(&Self, &mut Vec<O<'m>>)) -> Vec<O<'m>> {
        let mut out = Vec::with_capacity(1);
        f(self, &mut out);
        out
    }

    /// Appends a new instruction of the sandbox's own fixed forms, written straight as text:
    /// a tab and `guard`, then what `body` writes (the rest of the line, through `;\n`, as
    /// `print::parts` spells it). Building `Operand`s and printing them through `parts` cost
    /// several times as much for these lines, which are most of what the rewrite adds.
    pub(crate) fn text(
        out: &mut Vec<O<'m>>,
        guard: Option<&(Str<'_>, bool)>,
        body: impl FnOnce(&mut String),
    ) {
        Self::with_text(out, |t| {
            t.push('\t');
            if let Some((g, neg)) = guard {
                put(t, if *neg { "@!" } else { "@" });
                put(t, g);
                t.push(' ');
            }
            body(t);
        });
    }

    /// Appends to the text buffer at the end of `out` (one allocation for many new lines).
    pub(crate) fn with_text(out: &mut Vec<O<'m>>, f: impl FnOnce(&mut String)) {
        if let Some(O::Text(t)) = out.last_mut() {
            f(t);
            return;
        }
        // A fenced access's lines are a few hundred bytes, and a run of them shares a buffer:
        // begun at 512, a buffer was copied into a larger block about 150 times per rewrite of
        // the nvcc corpus.
        let mut t = String::with_capacity(1024);
        f(&mut t);
        out.push(O::Text(t));
    }

    /// Rewrites `body` into `out`; at the top level (`top`), without the declarations `start`
    /// hoists.
    fn stmts(&mut self, body: &'m [Stmt<'m>], top: bool, out: &mut Vec<O<'m>>) -> R<()> {
        for (k, s) in body.iter().enumerate() {
            if top && hoisted(s) {
                continue;
            }
            if self.defer_check {
                self.defer_step(s, &body[k + 1..], out);
            }
            match s {
                Stmt::Label(l, _) => {
                    self.pos += 1;
                    // Entering a nested loop's fast copy (only ever by falling through its
                    // check): its back-edges are counted here, ahead, by the check's bound.
                    let charged = &self.info.copies.charged;
                    if !charged.is_empty() && charged.contains(l.as_ref()) {
                        let vt = Operand::Name(Str::borrowed(super::version::VT));
                        let cnt = sreg("cnt");
                        self.emit(out, None, "sub", &["sat", "s32"], &[cnt.clone(), cnt, vt]);
                    }
                    out.push(O::Stmt(s));
                }
                Stmt::Inst(i) => {
                    self.line = i.line;
                    self.inst(i, &body[k + 1..], out)?;
                    self.pos += 1;
                }
                Stmt::Block(b) => {
                    let mut inner = Vec::with_capacity(b.len());
                    self.stmts(b, false, &mut inner)?;
                    // A label needs a statement after it before the block closes; the skip
                    // copy has no compares (`O::Kernel`), so its block may end in one where
                    // the kernel's does not.
                    let label = |o: &O<'_>| match o {
                        O::Stmt(s) => matches!(s, Stmt::Label(..)),
                        O::New(s) => matches!(**s, Stmt::Label(..)),
                        _ => false,
                    };
                    let filler = |fx: &Self, o: &mut Vec<O<'m>>| {
                        fx.emit(o, None, "mov", &["u32"], &[sreg("t"), sreg("t")]);
                    };
                    if inner.last().is_some_and(label) {
                        filler(self, &mut inner);
                    } else if inner
                        .iter()
                        .rev()
                        .find(|o| !matches!(o, O::Kernel(_)))
                        .is_some_and(label)
                    {
                        inner.push(O::Copy(self.emitted(filler)));
                    }
                    out.push(O::Block(inner));
                }
                other => out.push(O::Stmt(other)),
            }
        }
        Ok(())
    }

    fn inst(&mut self, i: &'m Inst<'m>, rest: &'m [Stmt<'m>], out: &mut Vec<O<'m>>) -> R<()> {
        let op = i.op;
        match op {
            // An arrival for the thread's copies, run on the sandbox's software barrier.
            Some(Opcode::Cp) if i.mods.iter().any(|m| m == "mbarrier") => {
                self.cp_async_arrive(i, out)
            }
            // (Its operands are two addresses, each relocated, and integers.)
            Some(Opcode::Cp) => self.cp_async(i, out),
            Some(Opcode::Mbarrier) => self.mbarrier(i, out),
            Some(Opcode::Ldmatrix | Opcode::Stmatrix) => self.matrix_access(i, out),
            // wmma.mma reads and writes registers only, as the plain instructions do; its loads
            // and stores reach a strided tile (matrix.rs).
            Some(Opcode::Wmma) if i.mods.iter().any(|m| m == "mma") => self.plain(i, out),
            Some(Opcode::Wmma) => self.wmma_access(i, out),
            Some(o) if o.sandbox() == Sandbox::Fence => self.mem(i, rest, out),
            // Hints only: dropping them cannot change results and leaves nothing to fence.
            Some(o) if o.sandbox() == Sandbox::Hint => Ok(()),
            Some(Opcode::Bra) => {
                if let Some(Operand::Name(l)) = i.operands.first()
                    && self.labels.get(l.as_ref()).is_some_and(|&p| p <= self.pos)
                    && !self.backedges.bounded.contains(&(i as *const Inst))
                    && let Some((copy, stop)) = self.backedge(i, out)
                {
                    out.push(O::new(Stmt::Inst(Inst {
                        guard: Some(copy),
                        ..i.clone()
                    })));
                    self.leave_loop(stop, true, out);
                    return Ok(());
                }
                out.push(O::Inst(i));
                // A bounded loop no loop encloses ends here: its iterations count now.
                if let Some(&n) = self.backedges.charge.get(&(i as *const Inst))
                    && !self.lean
                {
                    self.count_down(None, n, out);
                }
                Ok(())
            }
            Some(Opcode::Brx) => self.jump_table(i, out),
            // A relocated variable named anywhere but where the rewriter relocates it (the
            // access of `mem`, the address of `plain`) would be left undeclared.
            Some(Opcode::Call) => {
                super::globals::refuse_named_directly(&self.info.globals, i, None)?;
                self.call(i, out)
            }
            Some(Opcode::Nanosleep) => {
                super::globals::refuse_named_directly(&self.info.globals, i, None)?;
                // Up to a millisecond each: a straight run of them would hold the GPU for
                // minutes without a back-edge, so each counts as a whole poll interval. A
                // function with one is never lean (`span`), so it always has the count.
                out.push(O::Inst(i));
                let n = self.info.poll_interval;
                self.count_down(i.guard.clone(), n, out);
                Ok(())
            }
            _ => self.plain(i, out),
        }
    }

    /// Passes the hidden values to the callee through `.param` variables of a new block.
    fn call(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let (callee, args_at) = call_parts(i)?;
        if self.info.lean.contains(callee) {
            out.push(O::Inst(i));
            // A lean call counts toward the next poll like the back-edges of a loop that long
            // (a thread may otherwise make many of them in a row, straight or in a counted
            // loop, without polling); a lean caller has no count and polls nowhere: its own
            // span bounds it.
            if !self.lean {
                let span = self
                    .info
                    .lean_spans
                    .get(callee)
                    .copied()
                    .unwrap_or(super::LEAN_SPAN);
                self.count_down(i.guard.clone(), super::lean::call_weight(span), out);
            }
            return Ok(());
        }
        let names = hidden_params(false);
        let mut block = Vec::with_capacity(2 * names.len() + 1);
        let mut extra = Vec::with_capacity(names.len());
        for (k, n) in names.iter().enumerate() {
            let p = call_param(k);
            block.push(O::new(Stmt::Var(param_decl(p.clone(), "b64", i.line))));
            self.emit(
                &mut block,
                None,
                "st",
                &["param", "b64"],
                &[Operand::Addr(Some(p.clone()), 0), sreg(n)],
            );
            extra.push(Operand::Name(p));
        }
        let mut call = i.clone();
        match args_at {
            Some(k) => {
                if let Operand::List(a) = &mut call.operands[k] {
                    a.extend(extra);
                }
            }
            None => call.operands.push(Operand::List(extra)),
        }
        block.push(O::new(Stmt::Inst(call)));
        out.push(O::Block(block));
        Ok(())
    }

    /// Non-memory instructions: relocated variable names become `globals + offset`.
    fn plain(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let reloc = |o: &Operand| match o {
            Operand::Name(n) => self.info.globals.get(&**n).map(|&(off, _)| off as i64),
            Operand::Addr(Some(n), k) => self
                .info
                .globals
                .get(&**n)
                .map(|&(off, _)| (off as i64).wrapping_add(*k)),
            _ => None,
        };
        // Asked only of the two opcodes it matters to: most instructions come through here.
        let space_const = || i.mods.iter().any(|m| m == "const");
        let op = i.op;
        match op {
            Some(o) if o.sandbox() == Sandbox::Address && i.operands.len() == 2 => {
                if let Some(off) = reloc(&i.operands[1]) {
                    if !i
                        .mods
                        .iter()
                        .any(|m| m == "u64" || m == "b64" || m == "s64")
                    {
                        return Err(Error::Refused {
                            line: i.line,
                            what: "the address of a .global/.const variable needs 64 bits; \
                                   use mov.u64"
                                .into(),
                        });
                    }
                    self.emit(
                        out,
                        i.guard.clone(),
                        "add",
                        &["u64"],
                        &[i.operands[0].clone(), sreg("globals"), imm(off)],
                    );
                    return Ok(());
                }
                if o == Opcode::Cvta && space_const() {
                    // Relocated constants live in global memory: the conversion is the identity.
                    self.emit(
                        out,
                        i.guard.clone(),
                        "mov",
                        &["u64"],
                        &[i.operands[0].clone(), i.operands[1].clone()],
                    );
                    return Ok(());
                }
            }
            Some(Opcode::Isspacep) if space_const() => {
                let mut j = i.clone();
                for m in &mut j.mods {
                    if m == "const" {
                        *m = "global".into();
                    }
                }
                out.push(O::new(Stmt::Inst(j)));
                return Ok(());
            }
            _ => {}
        }
        super::globals::refuse_named_directly(&self.info.globals, i, None)?;
        if matches!(op, Some(Opcode::Ret | Opcode::Exit)) {
            out.push(O::Report(self.reports.clone()));
        }
        out.push(O::Inst(i));
        Ok(())
    }
}
