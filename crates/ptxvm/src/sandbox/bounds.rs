//! Registers that can only hold a bounded, aligned offset into one static `.shared` or `.local`
//! variable: nvcc's `and.b32 %r22, %r21, 1020; mov.u32 %r23, bins; add.s32 %r24, %r23, %r22;
//! atom.shared.add.u32 [%r24], 1` (a histogram's bin), or clang's `cvt.u32.u8` of a loaded
//! byte scaled by 4 and added to the variable's address. An access through such a register
//! whose every value lies inside the variable, aligned to the access, needs no window check.
//!
//! Each register gets an abstract value: a non-negative integer interval with a power-of-two
//! alignment, or a variable's address plus such an interval. The analysis is flow-insensitive
//! like statics.rs (which keeps exact offset sets for unrolled local arrays): a register's value
//! is the union over every instruction that writes it, and it is known only when every such
//! write is one of the forms below and every register those writes read is known too (a
//! register that feeds itself, as a loop counter does, is not). A register read before any
//! write would hold an undefined value, so the function starts by setting every register a
//! check was dropped for, and those its value depends on, to one of its values (`inits`).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::collections::hash_map::Entry;

use super::hash::{HashMap, HashMapExt, HashSet};

use super::statics::Flat;
use crate::ast::{Inst, Operand, Str};
use crate::ir::Ty;

/// Integers stay below 2^31, so signed and unsigned readings of 32- and 64-bit registers agree
/// and sums of two never overflow.
const MAX_INT: i64 = (1 << 31) - 1;

/// Integers in `[lo, hi]`, each a multiple of `align` (a power of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub lo: i64,
    pub hi: i64,
    pub align: i64,
}

impl Span {
    fn union(self, o: Span) -> Span {
        Span {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
            align: self.align.min(o.align),
        }
    }

    fn plus(self, o: Span) -> Option<Span> {
        let s = Span {
            lo: self.lo + o.lo,
            hi: self.hi + o.hi,
            align: self.align.min(o.align),
        };
        (s.lo.abs() <= MAX_INT && s.hi.abs() <= MAX_INT).then_some(s)
    }
}

/// What a register can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Val<'m> {
    /// A non-negative integer.
    Int(Span),
    /// A variable's address plus an integer (which may be negative).
    Addr(&'m str, Span),
}

/// The largest power of two dividing `k` (2^30 for 0: any alignment the analysis asks about).
fn lowbit(k: i64) -> i64 {
    if k == 0 {
        1 << 30
    } else {
        k & k.wrapping_neg()
    }
}

fn int(lo: i64, hi: i64, align: i64) -> Option<Val<'static>> {
    (0 <= lo && lo <= hi && hi <= MAX_INT).then_some(Val::Int(Span { lo, hi, align }))
}

fn join<'m>(a: Val<'m>, b: Val<'m>) -> Option<Val<'m>> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(Val::Int(x.union(y))),
        (Val::Addr(v, x), Val::Addr(w, y)) if v == w => Some(Val::Addr(v, x.union(y))),
        _ => None,
    }
}

fn add<'m>(a: Val<'m>, b: Val<'m>) -> Option<Val<'m>> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => {
            let s = x.plus(y)?;
            int(s.lo, s.hi, s.align)
        }
        (Val::Addr(v, x), Val::Int(y)) | (Val::Int(y), Val::Addr(v, x)) => {
            Some(Val::Addr(v, x.plus(y)?))
        }
        _ => None,
    }
}

/// `v * k` for an integer `v` and a constant `k >= 0`.
fn scale(v: Val<'_>, k: i64) -> Option<Val<'static>> {
    let Val::Int(s) = v else {
        return None;
    };
    if k < 0 {
        return None;
    }
    let align = s.align.saturating_mul(lowbit(k)).min(1 << 30);
    int(s.lo.checked_mul(k)?, s.hi.checked_mul(k)?, align)
}

/// Bits of an integer type name (`u8` → 8, `s32` → 32): not floats, not predicates.
fn bits(t: &str) -> Option<u32> {
    let ty = Ty::parse(t).filter(|ty| !ty.is_float() && *ty != Ty::Pred)?;
    Some(ty.bits())
}

/// Bits of an unsigned or bit integer type name.
fn ubits(t: &str) -> Option<u32> {
    Ty::parse(t).filter(|ty| !ty.signed()).and(bits(t))
}

/// A function body's registers, analysed on demand ([`Bounds::get`]): most functions ask about
/// none, and a function with no static variable has no address to bound.
#[derive(Default)]
pub(crate) struct Bounds<'m> {
    /// The body's instructions and nested declarations, until the analysis takes them.
    flat: RefCell<Flat<'m>>,
    /// The static `.shared`/`.local` variables whose addresses a register may hold.
    vars: HashSet<&'m str>,
    analysis: RefCell<Option<Analysis<'m>>>,
}

/// What an evaluation needs besides the analysis: the variables, and which registers the
/// entry can set.
struct Cx<'a, 'm> {
    vars: &'a HashSet<&'m str>,
    settable: &'a dyn Fn(&str) -> bool,
}

struct Analysis<'m> {
    /// The body's instructions, in order.
    all: Vec<&'m Inst<'m>>,
    /// Each register's writes: the first and last of its entries in `writes`. A map entry
    /// of 32 bytes rather than the 56 of an inline list (a register per instruction, nearly:
    /// filling the larger table, a cache miss a register, was most of `Bounds::get`'s time).
    defs: HashMap<&'m str, (usize, usize)>,
    /// The writes in order of `all`, each an index into `all` and the entry of the same
    /// register's next write ([`NO_WRITE`] after its last).
    writes: Vec<(usize, usize)>,
    memo: HashMap<&'m str, Option<Val<'m>>>,
    deps: HashMap<&'m str, Vec<&'m str>>,
    /// Registers declared in nested blocks: a register whose name starts with one of these may
    /// be shadowed there, and is never known. Asked of the registers `val` looks at, not of
    /// every register written (that was a walk over all of them per nested name: a tenth of a
    /// function's rewrite where nvcc's call blocks declare a few).
    nested: Vec<&'m str>,
    /// Registers `val` is working out now, one inside another's definition.
    depth: usize,
}

/// How deep `val` follows a register's definition through the registers it reads: a longer
/// chain is unknown (its accesses keep their fence). Each step is a few frames of this thread's
/// stack: a guest's chain of 20,000 dependent adds feeding an address overflowed it, which
/// aborts the process (every tenant with it).
const MAX_DEPTH: usize = 128;

/// The end of a register's list of writes ([`Analysis::writes`]).
const NO_WRITE: usize = usize::MAX;

/// Registers [`Analysis`] has room for before its maps grow.
const MEMO_ROOM: usize = 32;

impl<'m> Analysis<'m> {
    fn val(&mut self, cx: &Cx<'_, 'm>, r: &'m str) -> Option<Val<'m>> {
        if let Some(v) = self.memo.get(r) {
            return *v;
        }
        if self.nested.iter().any(|n| r.starts_with(n)) {
            self.memo.insert(r, None);
            return None;
        }
        if self.depth >= MAX_DEPTH {
            return None;
        }
        // A cycle reads this as unknown: a register that feeds itself is not bounded.
        self.memo.insert(r, None);
        if !(cx.settable)(r) {
            return None;
        }
        self.depth += 1;
        let v = self.val_of_defs(cx, r);
        self.depth -= 1;
        v
    }

    /// [`Analysis::val`] of `r` from its writes (memoized).
    fn val_of_defs(&mut self, cx: &Cx<'_, 'm>, r: &'m str) -> Option<Val<'m>> {
        let mut deps = Vec::new();
        // The union over every write: unknown at the first write that is (no write at all: the
        // register is a parameter or never set, so unknown too). The writes' indices copied
        // out of the map (`def` needs `self`), on the stack for the one or two of most.
        let (mut few, mut n, mut more) = ([0usize; 4], 0, Vec::new());
        let mut at = self.defs.get(r).map_or(NO_WRITE, |&(first, _)| first);
        while let Some(&(k, next)) = self.writes.get(at) {
            match few.get_mut(n) {
                Some(slot) if more.is_empty() => *slot = k,
                _ => {
                    if more.is_empty() {
                        more.extend_from_slice(&few);
                    }
                    more.push(k);
                }
            }
            n += 1;
            at = next;
        }
        let defs: &[usize] = if more.is_empty() { &few[..n] } else { &more };
        let v = defs
            .iter()
            .try_fold(None, |acc: Option<Val<'m>>, &k| {
                let i = *self.all.get(k)?;
                let v = self.def(cx, i, r, &mut deps)?;
                Some(Some(match acc {
                    None => v,
                    Some(a) => join(a, v)?,
                }))
            })
            .flatten();
        if v.is_some() {
            deps.sort_unstable();
            deps.dedup();
            self.deps.insert(r, deps);
        }
        self.memo.insert(r, v);
        v
    }

    /// An operand's value: a constant, or a known register (noted in `deps`).
    fn operand(
        &mut self,
        cx: &Cx<'_, 'm>,
        o: &'m Operand<'m>,
        deps: &mut Vec<&'m str>,
    ) -> Option<Val<'m>> {
        match o {
            Operand::Int(k) => int(*k, *k, lowbit(*k)),
            Operand::Name(n) if n.starts_with('%') => {
                deps.push(n);
                self.val(cx, n)
            }
            Operand::Name(n) if cx.vars.contains(n.as_ref()) => Some(Val::Addr(
                n,
                Span {
                    lo: 0,
                    hi: 0,
                    align: 1 << 30,
                },
            )),
            _ => None,
        }
    }

    /// What instruction `i`, which writes `r`, may set it to.
    fn def(
        &mut self,
        cx: &Cx<'_, 'm>,
        i: &'m Inst<'m>,
        r: &str,
        deps: &mut Vec<&'m str>,
    ) -> Option<Val<'m>> {
        // A guarded write is one of the union's writes like any other: when it does not run,
        // the register keeps a value some other write (or the inits) gave it.
        let [Operand::Name(d), src @ ..] = i.operands.as_slice() else {
            return None;
        };
        if d != r {
            return None;
        }
        // The modifiers as names, on the stack: every form below has at most two but `ld`, which
        // reads only the last and whether any is a vector size (more than a few: on the heap).
        let (mut few, mut more) = ([""; 4], Vec::new());
        let m: &[&str] = if i.mods.len() <= few.len() {
            for (slot, m) in few.iter_mut().zip(&i.mods) {
                *slot = m.as_ref();
            }
            &few[..i.mods.len()]
        } else {
            more.extend(i.mods.iter().map(|m| m.as_ref()));
            &more
        };
        let konst = |o: &Operand| match o {
            Operand::Int(k) => Some(*k),
            _ => None,
        };
        match (i.opcode.as_ref(), m, src) {
            ("mov", [t], [s]) if bits(t).is_some() => self.operand(cx, s, deps),
            ("cvt", [to, from], [s]) => {
                let (tb, fb) = (bits(to)?, bits(from)?);
                if ubits(from).is_some() && fb < tb && fb <= 16 {
                    // Zero-extends the source's low bits, whatever the register held.
                    return int(0, (1 << fb) - 1, 1);
                }
                let v = self.operand(cx, s, deps)?;
                let unsigned = ubits(to).is_some() && ubits(from).is_some();
                match v {
                    Val::Int(_) if tb >= 32 && fb >= 32 => Some(v),
                    // A `.shared`/`.local` address is below 2^32: only zero-extended or cut.
                    Val::Addr(..) if unsigned && tb >= 32 && fb >= 32 => Some(v),
                    _ => None,
                }
            }
            ("ld", mods, [_]) => match mods.last().copied().and_then(ubits) {
                Some(b @ (8 | 16)) if !mods.iter().any(|m| m.starts_with('v')) => {
                    int(0, (1 << b) - 1, 1)
                }
                _ => None,
            },
            ("and", [t], [a, b]) if bits(t)? >= 32 => {
                let k = konst(a).or_else(|| konst(b))?;
                int(0, k, lowbit(k))
            }
            ("rem", [t], [_, b]) if ubits(t)? >= 32 => {
                let k = konst(b)?;
                (k > 0).then(|| int(0, k - 1, 1)).flatten()
            }
            ("shr", [t], [a, b]) if ubits(t)? >= 32 => {
                let k = konst(b)?;
                if !(1..64).contains(&k) {
                    return None;
                }
                match self.operand(cx, a, deps) {
                    Some(Val::Int(s)) => int(s.lo >> k, s.hi >> k, 1),
                    _ => {
                        let top = u64::MAX >> (64 - ubits(t)?);
                        int(0, i64::try_from(top >> k).ok()?, 1)
                    }
                }
            }
            ("shl", [t], [a, b]) if bits(t)? >= 32 => {
                let k = konst(b).filter(|k| (0..31).contains(k))?;
                scale(self.operand(cx, a, deps)?, 1 << k)
            }
            ("mul", [form, t], [a, b]) if matches!(*form, "lo" | "wide") && bits(t)? >= 32 => {
                let (v, k) = match (konst(a), konst(b)) {
                    (Some(k), _) => (b, k),
                    (_, Some(k)) => (a, k),
                    _ => return None,
                };
                scale(self.operand(cx, v, deps)?, k)
            }
            ("add", [t], [a, b]) if bits(t)? >= 32 => {
                let (a, b) = (self.operand(cx, a, deps)?, self.operand(cx, b, deps)?);
                add(a, b)
            }
            _ => None,
        }
    }
}

/// The bounds of a body's registers (`flat`: its instructions and nested declarations), given
/// the static variables whose addresses they may hold.
pub(crate) fn analyse<'m>(flat: Flat<'m>, vars: HashSet<&'m str>) -> Bounds<'m> {
    Bounds {
        flat: RefCell::new(flat),
        vars,
        analysis: RefCell::new(None),
    }
}

impl<'m> Analysis<'m> {
    /// Every register's writes, read once.
    fn new(flat: Flat<'m>) -> Analysis<'m> {
        let Flat { insts: all, nested } = flat;
        // Sized once (nearly every instruction writes a register of its own): growing it
        // rehashed every register each time it doubled.
        let mut defs: HashMap<&'m str, (usize, usize)> = HashMap::with_capacity(all.len());
        let mut writes: Vec<(usize, usize)> = Vec::with_capacity(all.len() + 16);
        let mut w = Vec::new();
        for (k, i) in all.iter().enumerate() {
            w.clear();
            super::group::written_regs(i, &mut w);
            for r in &w {
                let this = writes.len();
                writes.push((k, NO_WRITE));
                match defs.entry(r) {
                    Entry::Occupied(mut e) => {
                        let (_, last) = e.get_mut();
                        if let Some(prev) = writes.get_mut(*last) {
                            prev.1 = this;
                        }
                        *last = this;
                    }
                    Entry::Vacant(e) => drop(e.insert((this, this))),
                }
            }
        }
        // Room for a few dozen registers' values at once (a function asks about a few
        // accesses, each a short chain of registers): grown from empty, both maps rehashed
        // every register they held each time they doubled.
        let memo = HashMap::with_capacity(MEMO_ROOM);
        Analysis {
            all,
            defs,
            writes,
            memo,
            deps: HashMap::with_capacity(MEMO_ROOM),
            nested: nested.iter().map(|(n, _)| *n).collect(),
            depth: 0,
        }
    }
}

impl<'m> Bounds<'m> {
    /// What `r` can hold, if known.
    /// What `r` can hold, if known; `settable(reg)` says whether the entry can give a register
    /// a value (`range_inits`): a proof resting on any other register is no proof.
    pub(crate) fn get(&self, r: &'m str, settable: &dyn Fn(&str) -> bool) -> Option<Val<'m>> {
        if self.vars.is_empty() {
            return None;
        }
        let cx = Cx {
            vars: &self.vars,
            settable,
        };
        let mut a = self.analysis.borrow_mut();
        a.get_or_insert_with(|| Analysis::new(self.flat.take()))
            .val(&cx, r)
    }

    /// `regs` (each one `get` knew) and every register their values depend on, sorted (the
    /// emitted PTX must not depend on a HashMap's order).
    pub(crate) fn closure(&self, regs: &BTreeSet<&'m str>) -> Vec<(&'m str, Val<'m>)> {
        let a = self.analysis.borrow();
        let Some(a) = a.as_ref() else {
            return Vec::new();
        };
        let mut seen: BTreeSet<&'m str> = BTreeSet::new();
        let mut todo: Vec<&'m str> = regs.iter().copied().collect();
        while let Some(r) = todo.pop() {
            if seen.insert(r) {
                todo.extend(a.deps.get(r).into_iter().flatten().copied());
            }
        }
        seen.into_iter()
            .filter_map(|r| Some((r, (*a.memo.get(r)?)?)))
            .collect()
    }
}

impl<'m> super::rewrite::Fx<'_, 'm> {
    /// A static variable a register may point into: (in `.shared`?, size, alignment).
    pub(super) fn static_var(&self, n: &str) -> Option<(bool, u64, u64)> {
        if let Some(&(size, align)) = self.local_vars.get(n) {
            return Some((false, size, align));
        }
        if let (Some(&size), Some(&align)) = (self.shared_fn.get(n), self.shared_align.get(n)) {
            return Some((true, size, align));
        }
        match (self.info.shared.get(n), self.info.shared_align.get(n)) {
            (Some(&Some(size)), Some(&align)) => Some((true, size, align)),
            _ => None,
        }
    }

    /// Whether a `w`-byte access at `[r + off]` in `.shared` (or `.local`) stays inside the
    /// static variable `r` points into, aligned, whatever `r` holds; if so `r` is noted for
    /// `range_inits`.
    pub(super) fn ranged_access(&self, r: &'m str, off: i64, w: u64, shared: bool) -> bool {
        let settable = |reg: &str| self.init_type(reg).is_some();
        let Some(Val::Addr(var, Span { lo, hi, align })) = self.bounds.get(r, &settable) else {
            return false;
        };
        let Some((in_shared, size, var_align)) = self.static_var(var) else {
            return false;
        };
        let w = w as i64;
        let ok = in_shared == shared
            && var_align >= w as u64
            && align >= w
            && off % w == 0
            // The offset is the guest's: checked, never wrapped.
            && lo.checked_add(off).is_some_and(|a| a >= 0)
            && hi
                .checked_add(off)
                .and_then(|e| e.checked_add(w))
                .is_some_and(|e| e as u64 <= size);
        if ok {
            self.unchecked.borrow_mut().insert(r);
        }
        ok
    }

    /// The `mov` type that sets register `r`: integer registers of 16, 32 or 64 bits only.
    fn init_type(&self, r: &str) -> Option<&'static str> {
        let ty = Ty::parse(self.reg_ty(r)?)?;
        match ty.bits() {
            _ if ty.is_float() => None,
            16 => Some("b16"),
            32 => Some("b32"),
            64 => Some("b64"),
            _ => None,
        }
    }

    /// Gives every register an access was left unchecked for, and those its value depends on,
    /// one of its values before the body runs: a read before any write must not see an
    /// undefined value (ptxas drops the moves where a write always comes first).
    pub(super) fn range_inits(&self, out: &mut Vec<super::print::O<'m>>) {
        use super::rewrite::imm;
        for (r, v) in self.bounds.closure(&self.unchecked.borrow()) {
            // `get` knows only registers with a type here (`settable`).
            let Some(ty) = self.init_type(r) else {
                continue;
            };
            match v {
                Val::Int(s) => {
                    let d = Operand::Name(Str::borrowed(r));
                    self.emit(out, None, "mov", &[ty], &[d, imm(s.lo)]);
                }
                Val::Addr(var, Span { lo, .. }) => {
                    let u = if ty == "b64" { "u64" } else { "u32" };
                    self.set_to_var_plus(out, r, u, var, lo);
                }
            }
        }
    }
}
