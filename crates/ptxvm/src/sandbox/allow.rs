//! The allow-list and the module-wide analysis behind the rewrite: which instructions (the
//! instruction table's `Sandbox` column) and declarations a sandboxed module may contain (everything else is refused with its line and
//! what to change), the call graph (no recursion, no indirect or external calls), each kernel's
//! local bytes along its deepest call chain and the shared variables it uses.

use super::hash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::Policy;
use super::bounded::{BackEdges, Cfg};
use super::forward::Look;
use super::globals::Offsets;
use crate::ast::{Func, Inst, Module, Operand, Space, Stmt};
use crate::error::Error;
use crate::isa::{Opcode, Refusal, Sandbox};
use crate::lower::var_size;

/// Prefixes of the names the rewriter adds; user code may not use them.
pub(crate) const RESERVED: [&str; 3] = ["%__sbx_", "__gpuhost_sbx_", "$__sbx_"];

/// What the rewrite of every function needs to know about the module.
pub(crate) struct Info<'m> {
    /// Device-function definitions by name.
    pub funcs: HashMap<&'m str, &'m Func<'m>>,
    /// Relocated `.global`/`.const` variables.
    pub globals: Offsets<'m>,
    /// Module `.shared` variables: name → static size (`None`: dynamic, `.extern`/`[]`).
    pub shared: HashMap<&'m str, Option<u64>>,
    /// Module `.shared` variables of static size → alignment.
    pub shared_align: HashMap<&'m str, u64>,
    /// Back-edges between polls.
    pub poll_interval: u32,
    /// `Policy::check_arena_at_entry`.
    pub check_arena: bool,
    /// `Policy::early_loop_free_check`.
    pub early_check: bool,
    /// Device functions that read no hidden value, nor do their callees (`lean::functions`):
    /// they get no hidden parameters and no prologue, and calls to them pass nothing extra.
    pub lean: HashSet<&'m str>,
    /// Each lean function's span (`lean::span`): what one call of it may run.
    pub lean_spans: HashMap<&'m str, u64>,
    /// Headers of versioned loops' copies (version.rs): a fast copy's back-edge needs no poll.
    pub copies: super::version::Copies,
    local: HashMap<&'m str, u64>,
    /// Each entry's own static `.shared` bytes (its function-scope variables), summed in the
    /// walk as `static_shared` counts them: a walk of its own over the body before.
    own_shared: HashMap<&'m str, u64>,
    refs: HashMap<&'m str, HashSet<&'m str>>,
    callees: HashMap<&'m str, Vec<&'m str>>,
    /// Each function body's control flow: bodies no longer change once analysed, and the
    /// rewrite asks about it several times (`forward_only`, `first_poll_span`, back-edges).
    cfgs: HashMap<*const Func<'m>, Cfg<'m>>,
    /// Each body's declared registers (single, ranges) and labels, counted in the walk
    /// (`Info::counts`).
    counts: HashMap<*const Func<'m>, [usize; 3]>,
    /// Each function's `straight_span` but for its calls (`Walk::plain`).
    plain: HashMap<&'m str, u64>,
    /// Each entry's `(first_poll_span, loop_free)`, settled once the lean functions are
    /// (`settle_entries`): the rewrite asks for both at each kernel, its skip copy and their
    /// prologues, and each answer walks the body's control flow.
    entries: HashMap<*const Func<'m>, (u64, bool)>,
    /// The back-edges `settle_entries` worked out for an entry's first-poll span, with the
    /// final lean set: its rewrite takes them ([`Info::back_edges`]) rather than work them out
    /// again.
    settled_edges: std::cell::RefCell<HashMap<*const Func<'m>, BackEdges<'m>>>,
    /// Each entry's `tree_shared`, settled with `entries`: the rewrite asks for it at the
    /// prologue and at every window check, and each answer walks the call tree.
    entry_shared: HashMap<&'m str, Vec<(&'m str, Option<u64>)>>,
}

fn refused<T>(line: u32, what: impl Into<String>) -> Result<T, Error> {
    Err(Error::Refused {
        line,
        what: what.into(),
    })
}

// Every reserved prefix has `_` second, which no register nvcc or clang names has (`%r12`,
// `%rd3`, `%p1`): one byte settles nearly every name the walk asks about.
const _: () = {
    let mut k = 0;
    while k < RESERVED.len() {
        assert!(RESERVED[k].len() > 1 && RESERVED[k].as_bytes()[1] == b'_');
        k += 1;
    }
};

fn reserved(name: &str) -> bool {
    name.as_bytes().get(1) == Some(&b'_') && RESERVED.iter().any(|p| name.starts_with(p))
}

/// Checks the whole module and builds the call graph.
pub(crate) fn analyse<'m>(
    m: &'m Module<'m>,
    globals: Offsets<'m>,
    policy: &Policy,
) -> Result<Info<'m>, Error> {
    let mut funcs: HashMap<&str, &Func> = HashMap::new();
    let mut shared = HashMap::new();
    let mut shared_align = HashMap::new();
    for v in &m.vars {
        if reserved(&v.name) {
            return refused(
                v.line,
                format!("the name {} is reserved; rename it", v.name),
            );
        }
        if v.space == Space::Shared {
            let size = if v.is_extern || v.count == Some(0) {
                None
            } else {
                let (size, align) = var_size(v)?;
                shared_align.insert(v.name.as_ref(), u64::from(align));
                Some(size)
            };
            shared.insert(v.name.as_ref(), size);
        }
    }
    // Every definition's name, entries included: a module defining one name twice (two
    // entries, or an entry and a device function) is invalid PTX that NVIDIA's JIT refuses, and
    // the host, which finds a kernel by name, could pair one entry's code with the other's
    // parameters. Each name maps to its first definition, gathered first so that a declaration
    // is checked in one lookup, not a walk; a later definition is refused in source order below.
    let mut defined: HashMap<&str, *const Func> = HashMap::with_capacity(m.funcs.len());
    for f in m.funcs.iter().filter(|f| f.body.is_some()) {
        defined.entry(f.name.as_ref()).or_insert(f as *const Func);
    }
    for f in &m.funcs {
        if reserved(&f.name) {
            return refused(
                f.line,
                format!("the name {} is reserved; rename it", f.name),
            );
        }
        if f.body.is_none() {
            if !defined.contains_key(f.name.as_ref()) {
                return refused(
                    f.line,
                    format!(
                        "{} is declared but not defined here; sandboxed modules are not linked, \
                         so define every function in the module",
                        f.name
                    ),
                );
            }
            continue;
        }
        if !defined
            .get(f.name.as_ref())
            .is_some_and(|&first| std::ptr::eq(first, f))
        {
            return Err(Error::Invalid {
                line: f.line,
                msg: format!("function {} defined twice", f.name),
            });
        }
        if !f.is_entry {
            funcs.insert(f.name.as_ref(), f);
        }
    }
    let mut info = Info {
        funcs,
        globals,
        shared,
        shared_align,
        poll_interval: policy.poll_interval,
        check_arena: policy.check_arena_at_entry,
        early_check: policy.early_loop_free_check,
        lean: HashSet::new(),
        lean_spans: HashMap::new(),
        copies: Default::default(),
        // One entry per function each, sized once: grown, they rehashed as they went.
        local: HashMap::with_capacity(m.funcs.len()),
        own_shared: HashMap::with_capacity(m.funcs.len()),
        refs: HashMap::with_capacity(m.funcs.len()),
        callees: HashMap::with_capacity(m.funcs.len()),
        cfgs: HashMap::with_capacity(m.funcs.len()),
        counts: HashMap::with_capacity(m.funcs.len()),
        plain: HashMap::with_capacity(m.funcs.len()),
        entries: HashMap::new(),
        settled_edges: Default::default(),
        entry_shared: HashMap::new(),
    };
    let mut calls: HashMap<&str, Vec<(&str, u32)>> = HashMap::with_capacity(m.funcs.len());
    for f in m.funcs.iter().filter(|f| f.body.is_some()) {
        for p in f.params.iter().chain(&f.rets) {
            if reserved(&p.name) {
                return refused(
                    p.line,
                    format!("the name {} is reserved; rename it", p.name),
                );
            }
        }
        let mut w = Walk {
            info: &info,
            f,
            calls: Vec::new(),
            refs: HashSet::new(),
            local: 0,
            shared: 0,
            look: Look::for_body(f.body.as_deref().unwrap_or(&[])),
            counts: [0; 3],
            plain: 0,
        };
        w.stmts(f.body.as_deref().unwrap_or(&[]), 0)?;
        let may_loop = w.look.may_loop();
        let (fc, refs, local, counts, shared) = (w.calls, w.refs, w.local, w.counts, w.shared);
        info.plain.insert(f.name.as_ref(), w.plain);
        if let Some(b) = f.body.as_deref() {
            info.cfgs
                .insert(f as *const Func, Cfg::of_looked(b, may_loop));
            info.counts.insert(f as *const Func, counts);
        }
        info.local.insert(f.name.as_ref(), local);
        info.own_shared.insert(f.name.as_ref(), shared);
        info.refs.insert(f.name.as_ref(), refs);
        info.callees
            .insert(f.name.as_ref(), fc.iter().map(|c| c.0).collect());
        calls.insert(f.name.as_ref(), fc);
    }
    // Recursion: any cycle in the call graph (frames are static on both drivers).
    let mut state: HashMap<&str, u8> = HashMap::with_capacity(m.funcs.len());
    fn dfs<'m>(
        f: &'m str,
        calls: &HashMap<&'m str, Vec<(&'m str, u32)>>,
        state: &mut HashMap<&'m str, u8>,
        local: &mut HashMap<&'m str, u64>,
        depth: u32,
    ) -> Result<u64, Error> {
        state.insert(f, 1);
        let mut deepest = 0u64;
        for &(c, line) in calls.get(f).map(Vec::as_slice).unwrap_or(&[]) {
            match state.get(c) {
                Some(1) => {
                    return refused(
                        line,
                        format!(
                            "recursive call to {c} (a cycle in the call graph); rewrite the \
                             recursion as a loop"
                        ),
                    );
                }
                Some(_) => deepest = deepest.max(local.get(c).copied().unwrap_or(0)),
                None => {
                    if depth > 256 {
                        return refused(line, "call chain deeper than 256; flatten it");
                    }
                    deepest = deepest.max(dfs(c, calls, state, local, depth + 1)?);
                }
            }
        }
        state.insert(f, 2);
        let total = local.get(f).copied().unwrap_or(0).saturating_add(deepest);
        local.insert(f, total);
        Ok(total)
    }
    for f in m.funcs.iter().filter(|f| f.body.is_some()) {
        if !state.contains_key(f.name.as_ref()) {
            dfs(f.name.as_ref(), &calls, &mut state, &mut info.local, 0)?;
        }
    }
    Ok(info)
}

/// What an atomic or reduction counts in [`Info::straight_span`]: a warp's 32 lanes on one
/// address are 32 operations in a row.
const ATOMIC_WEIGHT: u64 = 32;

impl<'m> Info<'m> {
    /// `.local` bytes of `f` plus its deepest callee chain.
    pub(crate) fn local_bytes(&self, f: &str) -> u64 {
        self.local.get(f).copied().unwrap_or(0)
    }

    /// `k` of the control flow of `f`'s body; `None` for a prototype.
    fn with_cfg<T>(&self, f: &'m Func<'m>, k: impl FnOnce(&Cfg<'m>) -> T) -> Option<T> {
        let body = f.body.as_deref()?;
        Some(match self.cfgs.get(&(f as *const Func)) {
            Some(c) => k(c),
            None => k(&Cfg::of(body)),
        })
    }

    /// How many registers (singly, in ranges) and labels `f`'s body declares, nested blocks
    /// included: what the rewrite sizes its maps for (zeros for a body the walk did not see).
    pub(crate) fn counts(&self, f: &'m Func<'m>) -> [usize; 3] {
        self.counts
            .get(&(f as *const Func))
            .copied()
            .unwrap_or_default()
    }

    /// Whether `f` has no loop (`Cfg::forward_only`); a prototype has none.
    pub(crate) fn forward_only(&self, f: &'m Func<'m>) -> bool {
        self.with_cfg(f, Cfg::forward_only).unwrap_or(true)
    }

    /// Every back-edge of `f`'s body, as (branch position, earliest header position; 0 when
    /// unknown), positions counting its labels and instructions (`Cfg::back`).
    pub(crate) fn loops(&self, f: &'m Func<'m>) -> Vec<(usize, usize)> {
        self.with_cfg(f, |c| c.back.clone()).unwrap_or_default()
    }

    /// The back-edges of `f`'s body that need no poll, and the weights of the others
    /// (`bounded::analyse`).
    pub(crate) fn back_edges(&self, f: &'m Func<'m>) -> BackEdges<'m> {
        if let Some(b) = self.settled_edges.borrow_mut().remove(&(f as *const Func)) {
            return b;
        }
        self.with_cfg(f, |c| {
            super::bounded::analyse(c, &self.lean, self.poll_interval, &self.copies)
        })
        .unwrap_or_default()
    }

    /// Computes every entry's [`Self::first_poll_span`] and [`Self::loop_free`] once, after
    /// `lean` and `lean_spans` are final (both depend on them).
    pub(crate) fn settle_entries(&mut self, m: &'m Module<'m>) {
        let mut edges = HashMap::new();
        let facts: HashMap<*const Func, (u64, bool)> = m
            .funcs
            .iter()
            .filter(|f| f.is_entry)
            .map(|f| {
                let span = self.first_poll_span_with(f, || {
                    let b = self.back_edges(f);
                    let loops = b.bounded.len();
                    edges.insert(f as *const Func, b);
                    loops
                });
                (f as *const Func, (span, self.loop_free_of(f, span)))
            })
            .collect();
        self.entries = facts;
        *self.settled_edges.get_mut() = edges;
        let shared = m
            .funcs
            .iter()
            .filter(|f| f.is_entry)
            .map(|f| (f.name.as_ref(), self.tree_shared_of(f.name.as_ref())))
            .collect();
        self.entry_shared = shared;
    }

    /// Whether neither `entry` nor any function it calls has a loop (`bounded::forward_only`)
    /// and its launches may skip the entry's epoch read ([`Self::first_poll_span`]): such a
    /// kernel compares the epoch at entry, behind a uniform branch its skipping launches take.
    pub(crate) fn loop_free(&self, entry: &'m Func<'m>) -> bool {
        match self.entries.get(&(entry as *const Func)) {
            Some(&(_, free)) => free,
            None => self.loop_free_of(entry, self.first_poll_span_of(entry)),
        }
    }

    /// [`Self::loop_free`] of `entry`, whose first-poll span is `span`.
    fn loop_free_of(&self, entry: &'m Func<'m>, span: u64) -> bool {
        self.forward_only(entry)
            && self.tree(entry.name.as_ref())[1..]
                .iter()
                .all(|c| self.funcs.get(c).is_none_or(|f| self.forward_only(f)))
            && span <= super::SKIP_ENTRY_READ_WORK
    }

    /// Whether any launch of `entry` may skip its epoch read: its first-poll span is within
    /// [`super::SKIP_ENTRY_READ_WORK`] (for one thread).
    pub(crate) fn may_skip_entry_read(&self, entry: &'m Func<'m>) -> bool {
        self.first_poll_span(entry) <= super::SKIP_ENTRY_READ_WORK
    }

    /// An upper bound on the instructions a thread of `entry` runs before it first polls or
    /// ends, were it to skip the entry's read; `u64::MAX` past [`super::SKIP_ENTRY_READ_WORK`]
    /// or when it sleeps (each `nanosleep` may take a millisecond: not work, but time).
    ///
    /// Between two taken back-edges a thread runs forward, each instruction at most once:
    /// `straight_span`, S. A loop-free entry runs one such stretch. Otherwise, before its first
    /// poll a thread takes at most `poll_interval` instrumented back-edges (each counts at least
    /// one), and the unpolled back-edges of its L bounded loops: at most `poll_interval` per
    /// entry into each, top-level loops entered once, and inner ones charged to the enclosing
    /// back-edge (whose weight is capped at `poll_interval`, so at most `L * poll_interval`
    /// before the enclosing back-edge polls). So at most `1 + pi * (1 + 2L)` stretches of S.
    pub(crate) fn first_poll_span(&self, entry: &'m Func<'m>) -> u64 {
        match self.entries.get(&(entry as *const Func)) {
            Some(&(span, _)) => span,
            None => self.first_poll_span_of(entry),
        }
    }

    /// [`Self::first_poll_span`], computed.
    fn first_poll_span_of(&self, entry: &'m Func<'m>) -> u64 {
        self.first_poll_span_with(entry, || self.back_edges(entry).bounded.len())
    }

    /// [`Self::first_poll_span_of`], given how to count `entry`'s bounded loops (asked only of
    /// an entry that loops).
    fn first_poll_span_with(&self, entry: &'m Func<'m>, bounded: impl FnOnce() -> usize) -> u64 {
        if entry.body.is_none() {
            return 0;
        }
        let s = self.straight_span(entry);
        if s >= super::lean::NANOSLEEP_SPAN {
            return u64::MAX;
        }
        let stretches = if self.forward_only(entry) {
            1
        } else {
            let pi = u64::from(self.poll_interval);
            let loops = bounded();
            1 + pi * (1 + 2 * loops as u64)
        };
        match s.saturating_mul(stretches) {
            w if w <= super::SKIP_ENTRY_READ_WORK => w,
            _ => u64::MAX,
        }
    }

    /// An upper bound on the work of one pass through `f`'s body until it polls: each
    /// instruction once, an atomic or reduction as [`ATOMIC_WEIGHT`] (a warp's lanes may
    /// serialise on one address), a lean call as its callee's span, any other call as one (its
    /// callee polls at entry). Saturating.
    ///
    /// The walk summed all but the calls (`plain`); a call counts here, once the lean
    /// functions and their spans are known, for each call in the body (`callees`).
    fn straight_span(&self, f: &'m Func<'m>) -> u64 {
        let name = f.name.as_ref();
        let plain = self.plain.get(name).copied().unwrap_or(0);
        self.callees(name).iter().fold(plain, |total, c| {
            total.saturating_add(self.lean_spans.get(c).copied().unwrap_or(1))
        })
    }

    /// The functions `f` calls directly.
    pub(crate) fn callees(&self, f: &str) -> &[&'m str] {
        self.callees.get(f).map_or(&[], Vec::as_slice)
    }

    /// Functions reachable from `f`, `f` included.
    pub(crate) fn tree(&self, f: &'m str) -> Vec<&'m str> {
        let mut seen = vec![f];
        // Membership in a set: asking the list made a call chain of n functions n^2 / 2 name
        // compares (a chain of 2,000: a fifth of its rewrite).
        let mut known: HashSet<&str> = HashSet::from_iter([f]);
        let mut i = 0;
        while i < seen.len() {
            for &c in self.callees.get(seen[i]).map(Vec::as_slice).unwrap_or(&[]) {
                if known.insert(c) {
                    seen.push(c);
                }
            }
            i += 1;
        }
        seen
    }

    /// Module `.shared` variables the kernel `f` and its callees name, in declaration order of
    /// first use, with their static sizes (`None`: dynamic).
    pub(crate) fn tree_shared(&self, f: &'m str) -> std::borrow::Cow<'_, [(&'m str, Option<u64>)]> {
        match self.entry_shared.get(f) {
            Some(v) => std::borrow::Cow::Borrowed(v),
            None => std::borrow::Cow::Owned(self.tree_shared_of(f)),
        }
    }

    /// [`Self::tree_shared`], worked out.
    fn tree_shared_of(&self, f: &'m str) -> Vec<(&'m str, Option<u64>)> {
        let mut names: Vec<(&str, Option<u64>)> = Vec::new();
        let mut named: HashSet<&str> = HashSet::new();
        for g in self.tree(f) {
            for &n in self.refs.get(g).into_iter().flatten() {
                if let Some(&s) = self.shared.get(n)
                    && named.insert(n)
                {
                    names.push((n, s));
                }
            }
        }
        names.sort_unstable_by_key(|x| x.0);
        names
    }

    /// Bytes of static shared memory the kernel uses (module variables it names plus its own
    /// function-scope ones), each aligned to 16 as an upper bound of the real layout.
    pub(crate) fn static_shared(&self, f: &'m Func<'m>) -> u64 {
        let mut total = 0u64;
        for (_, s) in self.tree_shared(f.name.as_ref()).iter().copied() {
            total = total.saturating_add(s.unwrap_or(0).div_ceil(16) * 16);
        }
        total.saturating_add(self.own_shared.get(f.name.as_ref()).copied().unwrap_or(0))
    }
}

/// One function's walk: allow-list checks, calls, names used, `.local` bytes.
struct Walk<'a, 'm> {
    info: &'a Info<'m>,
    f: &'m Func<'m>,
    calls: Vec<(&'m str, u32)>,
    refs: HashSet<&'m str>,
    local: u64,
    /// Its function-scope `.shared` variables' bytes, each rounded up to 16 (`static_shared`).
    shared: u64,
    /// Whether the body may loop, looked at in this walk (`Cfg::of_looked`).
    look: Look<'m>,
    /// [`Info::counts`] of the body.
    counts: [usize; 3],
    /// The work of one pass through the body but for its calls, as `Info::straight_span`
    /// counts it: each instruction once, an atomic or reduction as [`ATOMIC_WEIGHT`], a
    /// `nanosleep` as `NANOSLEEP_SPAN`. Saturating.
    plain: u64,
}

impl<'m> Walk<'_, 'm> {
    fn stmts(&mut self, body: &'m [Stmt<'m>], depth: u32) -> Result<(), Error> {
        for s in body {
            match s {
                Stmt::Reg { names, line, .. } => {
                    for (n, range) in names {
                        if reserved(n) {
                            return refused(*line, format!("the name {n} is reserved; rename it"));
                        }
                        self.counts[usize::from(range.is_some())] += 1;
                    }
                }
                Stmt::Var(v) => {
                    if reserved(&v.name) {
                        return refused(v.line, format!("the name {} is reserved", v.name));
                    }
                    match v.space {
                        Space::Global | Space::Const => {
                            return refused(
                                v.line,
                                "function-scope .global/.const variable; declare it at module \
                                 scope",
                            );
                        }
                        Space::Local | Space::Shared if depth > 0 => {
                            return refused(
                                v.line,
                                "a .local/.shared variable inside a nested { } block; declare it \
                                 at the top of the function",
                            );
                        }
                        Space::Shared if !self.f.is_entry => {
                            return refused(
                                v.line,
                                "a .shared variable inside a .func; declare it at module scope",
                            );
                        }
                        Space::Shared if v.is_extern || v.count == Some(0) => {
                            return refused(
                                v.line,
                                "a dynamic .shared variable inside a function; declare it at \
                                 module scope",
                            );
                        }
                        Space::Local => {
                            let (size, align) = var_size(v)?;
                            let a = u64::from(align);
                            self.local = (self.local.div_ceil(a) * a).saturating_add(size);
                        }
                        // An entry's own static variable (`static_shared`; a size it cannot
                        // work out counts nothing there).
                        Space::Shared => {
                            if let Ok((size, _)) = var_size(v) {
                                self.shared = self.shared.saturating_add(size.div_ceil(16) * 16);
                            }
                        }
                        _ => {}
                    }
                }
                Stmt::Label(l, line) | Stmt::Targets(l, _, line) => {
                    if reserved(l) {
                        return refused(*line, format!("the label {l} is reserved; rename it"));
                    }
                    if let Stmt::Label(..) = s {
                        self.look.label(l);
                        self.counts[2] += 1;
                    }
                }
                Stmt::Inst(i) => {
                    self.look.inst(i);
                    self.inst(i)?;
                }
                Stmt::Block(b) => self.stmts(b, depth + 1)?,
            }
        }
        Ok(())
    }

    fn inst(&mut self, i: &'m Inst<'m>) -> Result<(), Error> {
        let op = i.op;
        let w = match op {
            Some(Opcode::Call) => 0,
            // An mbarrier arrival is up to three shared atomics (sandbox/mbarrier.rs).
            Some(Opcode::Atom | Opcode::Red | Opcode::Mbarrier) => ATOMIC_WEIGHT,
            Some(Opcode::Nanosleep) => super::lean::NANOSLEEP_SPAN,
            _ => 1,
        };
        self.plain = self.plain.saturating_add(w);
        let sandbox = op.map(Opcode::sandbox);
        check_opcode(i, sandbox)?;
        check_barrier(i, op)?;
        // Only the memory instructions `fence` rewrites (and the hints it drops) may take a
        // `[address]` operand (`mov` and `cvta` take `var+offset`, parsed the same way).
        let memory = matches!(
            sandbox,
            Some(Sandbox::Fence | Sandbox::Hint | Sandbox::Address)
        );
        let operands: &[Operand] = &i.operands;
        if !memory && operands.iter().any(|o| matches!(o, Operand::Addr(..))) {
            return refused(
                i.line,
                format!(
                    "{} with a memory operand; only ld/st/atom/red may address memory",
                    i.opcode
                ),
            );
        }
        if let Some((g, _)) = &i.guard
            && reserved(g)
        {
            return refused(i.line, format!("the name {g} is reserved"));
        }
        for o in operands {
            match o {
                // A register, unreserved, or an address through one, or a constant: most
                // operands, and nothing to check or note (`operand`).
                Operand::Name(n) | Operand::Addr(Some(n), _)
                    if n.starts_with('%') && !reserved(n) => {}
                Operand::Int(_) | Operand::F32Bits(_) | Operand::F64Bits(_) | Operand::Sink => {}
                o => self.operand(o, i.line)?,
            }
        }
        if op == Some(Opcode::Call) {
            let (callee, _) = call_parts(i)?;
            if !self.info.funcs.contains_key(callee) {
                return refused(
                    i.line,
                    format!(
                        "call to {callee}, which is not a function defined in this module; \
                         sandboxed modules may only call their own device functions directly"
                    ),
                );
            }
            self.calls.push((callee, i.line));
        }
        Ok(())
    }

    fn operand(&mut self, o: &'m Operand<'m>, line: u32) -> Result<(), Error> {
        let name = match o {
            Operand::Name(n) | Operand::Not(n) | Operand::Addr(Some(n), _) => n,
            Operand::Pair(p) => {
                for n in [&p.0, &p.1] {
                    if reserved(n) {
                        return refused(line, format!("the name {n} is reserved"));
                    }
                }
                return Ok(());
            }
            Operand::Vec(v) | Operand::List(v) => {
                for x in v {
                    // A register, unreserved (nearly every element: `mma`'s fragments), has
                    // nothing to check or note, as in `inst`: passed over without a call.
                    if !matches!(x, Operand::Name(n) if n.starts_with('%') && !reserved(n)) {
                        self.operand(x, line)?;
                    }
                }
                return Ok(());
            }
            Operand::Image(..) => {
                return refused(
                    line,
                    "texture/surface operands; read the data with ld.global instead",
                );
            }
            _ => return Ok(()),
        };
        if reserved(name) {
            return refused(line, format!("the name {name} is reserved"));
        }
        // Only variable names matter here (which shared variables a kernel uses); registers,
        // which nvcc and clang name with '%', are the bulk and are skipped.
        if !name.starts_with('%') && self.info.shared.contains_key(name.as_ref()) {
            self.refs.insert(name.as_ref());
        }
        Ok(())
    }
}

/// Allows a block barrier (`bar`, `barrier`; not the warp's `bar.warp.sync`) only in the form
/// that cannot leave a block waiting forever: barrier 0, every thread of the block, no
/// predicate, not `arrive`. Threads waiting at two barrier ids, a thread count never reached,
/// or a predicated barrier leave threads waiting where no stop reaches them (no poll runs
/// while they wait) and ptxvm faults such a launch, which would end every guest on softcuda.
/// Exited threads count as arrived (in ptxvm, and as common CUDA code relies on NVIDIA's GPUs
/// doing: `if (i >= n) return; __syncthreads();`), so threads a stop ends release the others.
fn check_barrier(i: &Inst, op: Option<Opcode>) -> Result<(), Error> {
    if !matches!(op, Some(Opcode::Bar | Opcode::Barrier)) || i.mods.iter().any(|m| m == "warp") {
        return Ok(());
    }
    // bar.sync a{, b}; bar.red.op.type d, a{, b}, {!}c.
    let id_at = usize::from(i.mods.iter().any(|m| m == "red"));
    let whole_block = i.operands.len() == id_at * 2 + 1;
    let block_zero = matches!(i.operands.get(id_at), Some(Operand::Int(0)));
    if i.guard.is_some() || i.mods.iter().any(|m| m == "arrive") || !whole_block || !block_zero {
        return refused(
            i.line,
            format!(
                "{}{}{}: sandboxed kernels may use only barrier 0 for the whole block, unpredicated \
                 (`bar.sync 0`, `bar.red.op 0`); named barriers, thread counts, `arrive` and \
                 predicated barriers can leave threads waiting forever",
                i.opcode,
                i.mods.iter().map(|m| format!(".{m}")).collect::<String>(),
                if i.guard.is_some() {
                    " (predicated)"
                } else {
                    ""
                },
            ),
        );
    }
    Ok(())
}

/// Refuses the opcodes the instruction table (`isa`) marks refused for the sandbox, and any
/// word that is not PTX at all; `sandbox` is what the table says of `i`'s opcode (`None`: not
/// PTX).
fn check_opcode(i: &Inst, sandbox: Option<Sandbox>) -> Result<(), Error> {
    match sandbox.unwrap_or(Sandbox::Refuse(Refusal::NotAllowed)) {
        Sandbox::Refuse(why) => refused(i.line, why.message(&i.opcode)),
        Sandbox::Plain | Sandbox::Address | Sandbox::Fence | Sandbox::Hint => Ok(()),
    }
}

/// A direct call's callee and where its argument list sits (`None`: no arguments).
pub(crate) fn call_parts<'m>(i: &'m Inst<'_>) -> Result<(&'m str, Option<usize>), Error> {
    let k = usize::from(matches!(i.operands.first(), Some(Operand::List(_))));
    let callee = match i.operands.get(k) {
        Some(Operand::Name(n)) if !n.starts_with('%') => n.as_ref(),
        _ => {
            return refused(
                i.line,
                "indirect call (through a register); call the function by name",
            );
        }
    };
    // Registers as arguments or return values (`call (%r4), f, (%r1)` to a `.func (.reg .b32
    // %res) f(.reg .b32 %x)`) are refused: the analyses that drop checks reason about each
    // register's writes, and a call writing its return register was one they did not see
    // (session 19's red team); nvcc and clang pass `.param` variables.
    let passed = [i.operands.first(), i.operands.get(k + 1)];
    for o in passed.into_iter().flatten() {
        if let Operand::List(v) = o
            && let Some(r) = v
                .iter()
                .find(|a| !matches!(a, Operand::Name(n) if !n.starts_with('%')))
        {
            let what = match r {
                Operand::Name(n) => n.clone(),
                _ => "a constant".into(),
            };
            return refused(
                i.line,
                format!(
                    "call passing or returning {what}: only .param variables may be passed (as nvcc and clang do); declare .param arguments"
                ),
            );
        }
    }
    match (i.operands.get(k + 1), i.operands.len()) {
        (None, _) => Ok((callee, None)),
        (Some(Operand::List(_)), n) if n == k + 2 => Ok((callee, Some(k + 1))),
        _ => refused(
            i.line,
            "indirect call through a prototype; call the function by name",
        ),
    }
}
