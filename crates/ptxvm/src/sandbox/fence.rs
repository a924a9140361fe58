//! Memory-access rewrites. Every `ld`/`ldu`/`st`/`atom`/`red` is classified by state space and
//! address form:
//! - global (and relocated `.const`): the address, aligned down to the access width W, runs
//!   when it lies in `[base, base+size-W]`; out of range the control block's fault word is set
//!   and the access goes to `base`, or, for a load or store in a loop, is skipped (a load's
//!   destinations zeroed: `global_access`);
//! - shared / local through a register: the address (aligned down, cut to 32 bits) must lie in
//!   the kernel's shared window / the thread's local window, else the access is skipped (a
//!   shared atomic or run of shared loads goes to the window's start instead, where it fits:
//!   window.rs, group.rs) and the fault word set;
//! - generic: `isspacep` picks one of the three fenced forms at run time;
//! - a variable named with an in-range constant offset needs no check, nor does a register that
//!   can only point inside one static variable (statics.rs, bounds.rs).
//!
//! `ldmatrix`/`stmatrix` rows are fenced in matrix.rs, `cp.async` in cp_async.rs.

use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R, sreg};
use crate::ast::{Inst, Operand, Stmt, Str};
use crate::error::Error;
use crate::ir::Ty;
use crate::isa::Opcode;
use crate::small::Small;

/// Where an access goes, from its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sp {
    Global,
    Shared,
    Local,
    Const,
    Param,
    Generic,
}

/// How the address is written.
pub(super) enum Src<'m> {
    /// A declared register, the offset, and the register's type (looked up once per access).
    Reg(&'m str, i64, &'m str),
    Abs(i64),
    Sym(&'m str, i64),
}

// The modifier kinds `respace` tells apart, as matches (a length switch, then a compare or
// two), not scans of name lists: every fenced access asks them of each of its modifiers.
fn is_space(m: &str) -> bool {
    matches!(m, "global" | "local" | "const")
        || matches!(m, "shared" | "shared::cta")
        || matches!(m, "param" | "param::entry" | "param::func")
}

fn is_sem(m: &str) -> bool {
    matches!(
        m,
        "weak"
            | "volatile"
            | "relaxed"
            | "acquire"
            | "release"
            | "acq_rel"
            | "sc"
            | "mmio"
            | "cta"
            | "gpu"
            | "sys"
            | "cluster"
    )
}

fn is_hint(m: &str) -> bool {
    matches!(m, "ca" | "cg" | "cs" | "lu" | "cv" | "wb" | "wt" | "nc")
        || m.starts_with("L1::")
        || m.starts_with("L2::")
}

/// Whether a register of type `t` is 64 bits of integer.
fn wide(t: &str) -> bool {
    matches!(t, "u64" | "b64" | "s64")
}

pub(super) fn refused<T>(line: u32, what: impl Into<String>) -> R<T> {
    Err(Error::Refused {
        line,
        what: what.into(),
    })
}

/// State space and bytes of one access, in one pass over the modifiers from the end (every
/// memory instruction, and every access a run looks at, asks both). The space is the last one
/// named (generic if none); a `shared::`/`param::` form other than the plain ones is refused,
/// the first named. The last vector size and the last type name count: read from the end, the
/// type is nearly always the first modifier looked at (`ld.global.nc.f32`), and no other is
/// parsed but one that comes after it.
fn space_and_width(i: &Inst) -> R<(Sp, u64)> {
    let (mut sp, mut bad, mut vec, mut ty) = (None, None, None, None);
    for m in i.mods.iter().rev() {
        let s = match m.as_ref() {
            "global" => Sp::Global,
            "shared" | "shared::cta" => Sp::Shared,
            "local" => Sp::Local,
            "const" => Sp::Const,
            "param" | "param::entry" | "param::func" => Sp::Param,
            m if m.starts_with("shared::") || m.starts_with("param::") => {
                bad = Some(m);
                continue;
            }
            "v2" => {
                vec = vec.or(Some(2));
                continue;
            }
            "v4" => {
                vec = vec.or(Some(4));
                continue;
            }
            "v8" => {
                vec = vec.or(Some(8));
                continue;
            }
            t => {
                if ty.is_none() {
                    ty = Ty::parse(t);
                }
                continue;
            }
        };
        sp = sp.or(Some(s));
    }
    if let Some(m) = bad {
        return refused(
            i.line,
            format!("state space .{m}; use .global, .shared, .local or generic addresses"),
        );
    }
    let vec = vec.unwrap_or(1u64);
    let Some(ty) = ty.filter(|t| *t != Ty::Pred) else {
        return refused(i.line, format!("{} without a data type", i.opcode));
    };
    let w = u64::from(ty.bytes()) * vec;
    if w > 32 || !w.is_power_of_two() {
        return refused(
            i.line,
            format!("{w}-byte access; the sandbox allows up to 32 bytes"),
        );
    }
    Ok((sp.unwrap_or(Sp::Generic), w))
}

/// The modifiers with `sp` as state space, right after the leading memory-model qualifiers;
/// hints that only global memory takes and (for local) memory-model qualifiers are dropped.
/// Each is handed to `put` in order, the space as `None`.
fn respace_each<'s, 'a>(
    mods: &'s [Str<'a>],
    sp: &'static str,
    mut put: impl FnMut(Option<&'s Str<'a>>),
) {
    let strip_hints = sp != "global";
    let strip_sem = sp == "local";
    let kept = mods
        .iter()
        .filter(|m| !(is_space(m) || strip_hints && is_hint(m) || strip_sem && is_sem(m)));
    let mut placed = false;
    for m in kept {
        if !placed && !is_sem(m) {
            put(None);
            placed = true;
        }
        put(Some(m));
    }
    if !placed {
        put(None);
    }
}

/// [`respace_each`]'s modifiers, as an instruction's.
/// Kept inline (a few): a list per fenced access was an allocation each.
fn respace<'a>(mods: &[Str<'a>], sp: &'static str) -> Small<Str<'a>, 3> {
    let mut v = Small::new();
    respace_each(mods, sp, |m| {
        v.push(m.cloned().unwrap_or(Str::borrowed(sp)));
    });
    v
}

/// Most modifiers [`respaced`] keeps on the stack.
const FEW_MODS: usize = 8;

/// `f` of [`respace_each`]'s modifiers, borrowed: a fenced access printed so copies no
/// modifier and drops no list.
fn respaced<R>(mods: &[Str<'_>], sp: &'static str, f: impl FnOnce(&[&str]) -> R) -> R {
    let (mut few, mut n, mut more) = ([""; FEW_MODS], 0, Vec::new());
    respace_each(mods, sp, |m| {
        let m = m.map_or(sp, |m| m.as_ref());
        if n < FEW_MODS {
            few[n] = m;
            n += 1;
        } else {
            if more.is_empty() {
                more.extend_from_slice(&few);
            }
            more.push(m);
        }
    });
    if more.is_empty() {
        f(&few[..n])
    } else {
        f(&more)
    }
}

/// `sub.u64 %__sbx_x, x, %__sbx_base;`: the offset into the arena that a global fence compares
/// against its limit (`past_limit`).
pub(super) fn offset_from_base(t: &mut String, x: &str) {
    put(t, "sub.u64 %__sbx_x, ");
    put(t, x);
    put(t, ", %__sbx_base;\n");
}

/// `, g` or `, !g`: `guard` as a compare's last operand (`setp_under`); nothing without one.
pub(super) fn guard_operand(t: &mut String, guard: Option<&(Str<'_>, bool)>) {
    if let Some((g, neg)) = guard {
        put(t, if *neg { ", !" } else { ", " });
        put(t, g);
    }
}

pub(super) fn pred<'a>(g: &(Str<'a>, bool)) -> Operand<'a> {
    if g.1 {
        Operand::Not(g.0.clone())
    } else {
        Operand::Name(g.0.clone())
    }
}

impl<'m> Fx<'_, 'm> {
    /// State space, width and address operand index of a memory instruction.
    pub(super) fn classify(i: &Inst) -> R<(Sp, u64, usize)> {
        let at = usize::from(!matches!(i.op, Some(Opcode::St | Opcode::Red)));
        let (mut sp, w) = space_and_width(i)?;
        if sp == Sp::Generic && i.op == Some(Opcode::Ldu) {
            // ldu reads global memory only; a generic address must point there.
            sp = Sp::Global;
        }
        Ok((sp, w, at))
    }

    /// Rewrites one memory instruction; `rest` is what follows it in its block (accesses
    /// there may share its fence).
    pub(crate) fn mem(
        &mut self,
        i: &'m Inst<'m>,
        rest: &'m [Stmt<'m>],
        out: &mut Vec<O<'m>>,
    ) -> R<()> {
        if self.member(i, out)? {
            return Ok(());
        }
        let (sp, w, at) = Self::classify(i)?;
        super::globals::refuse_named_directly(&self.info.globals, i, Some(at))?;
        let is_atomic = matches!(i.op, Some(Opcode::Atom | Opcode::Red));
        if !is_atomic && i.operands.len() != 2 {
            return refused(
                i.line,
                format!("{} with a cache-policy operand; drop the policy", i.opcode),
            );
        }
        let Some(Operand::Addr(base, off)) = i.operands.get(at) else {
            return refused(
                i.line,
                "memory operand must be [register+offset] or [variable+offset]",
            );
        };
        let off = *off;
        let src = self.src_of(base, off);
        let in_range =
            |size: u64| off >= 0 && (off as u64).checked_add(w).is_some_and(|e| e <= size);
        match (sp, src) {
            (Sp::Param, Src::Sym(n, _)) => match self.params.get(n) {
                Some(&size) if in_range(size) => {
                    out.push(O::Inst(i));
                    Ok(())
                }
                Some(_) => refused(i.line, format!("access past the end of parameter {n}")),
                None => refused(i.line, format!("{n} is not a parameter of this function")),
            },
            (Sp::Param, _) => refused(
                i.line,
                "parameter access through a register; name the parameter ([param+offset])",
            ),
            (Sp::Global | Sp::Const | Sp::Generic, Src::Sym(n, _))
                if self.info.globals.contains_key(n) =>
            {
                let (goff, size) = self.info.globals[n];
                self.global_addr(out, "%__sbx_a", goff, off);
                if in_range(size) {
                    self.access(out, i, at, "global", i.guard.clone());
                } else {
                    self.global_access(out, i, at, "%__sbx_a", w, i.guard.as_ref());
                }
                Ok(())
            }
            (Sp::Global | Sp::Const, Src::Sym(n, _)) => refused(
                i.line,
                format!("{n} is not a .global/.const variable of this module"),
            ),
            (Sp::Global | Sp::Const, Src::Reg(r, o, t))
                if self.group(i, rest, (sp, w, at), (r, o, t), out)? =>
            {
                Ok(())
            }
            // statics.rs first: its exact offsets are cheaper to check than bounds.rs's proofs.
            (Sp::Local, Src::Reg(r, o, _)) if !is_atomic && self.static_local(r, o, w) => {
                out.push(O::Inst(i));
                Ok(())
            }
            (Sp::Shared | Sp::Local, Src::Reg(r, o, _))
                if !(is_atomic && sp == Sp::Local)
                    && self.ranged_access(r, o, w, sp == Sp::Shared) =>
            {
                out.push(O::Inst(i));
                Ok(())
            }
            (Sp::Shared, Src::Reg(r, o, t))
                if self.group(i, rest, (sp, w, at), (r, o, t), out)? =>
            {
                Ok(())
            }
            (Sp::Local, Src::Reg(r, o, t))
                if !is_atomic && self.group(i, rest, (sp, w, at), (r, o, t), out)? =>
            {
                Ok(())
            }
            (Sp::Global | Sp::Const, src) => {
                let x = match src {
                    Src::Reg(r, 0, t) if wide(t) => r,
                    src => {
                        self.load(out, &src, i.line)?;
                        "%__sbx_a"
                    }
                };
                self.global_access(out, i, at, x, w, i.guard.as_ref());
                Ok(())
            }
            (Sp::Shared | Sp::Generic, Src::Sym(n, _)) if self.shared_size(n).is_some() => {
                match self.shared_size(n).flatten() {
                    Some(size) if in_range(size) => {
                        self.direct(out, i, "shared", sp);
                        Ok(())
                    }
                    _ => self.windowed(out, i, at, &Src::Sym(n, off), w, "shared"),
                }
            }
            (Sp::Local | Sp::Generic, Src::Sym(n, _)) if self.locals.contains_key(n) => {
                if is_atomic {
                    return refused(i.line, "atomics on .local memory; use shared or global");
                }
                if in_range(self.locals[n]) {
                    self.direct(out, i, "local", sp);
                    Ok(())
                } else {
                    self.windowed(out, i, at, &Src::Sym(n, off), w, "local")
                }
            }
            (_, Src::Sym(n, _)) => refused(
                i.line,
                format!("{n} is not a variable of the access's state space"),
            ),
            (Sp::Local, _) if is_atomic => {
                refused(i.line, "atomics on .local memory; use shared or global")
            }
            (Sp::Shared, src) => self.windowed(out, i, at, &src, w, "shared"),
            (Sp::Local, src) => self.windowed(out, i, at, &src, w, "local"),
            (Sp::Generic, src) => self.generic(out, i, at, &src, w),
        }
    }

    /// How the address `[b+off]` is written: a declared register (with its type), a variable,
    /// or an absolute address.
    pub(super) fn src_of(&self, b: &'m Option<Str<'m>>, off: i64) -> Src<'m> {
        match b {
            None => Src::Abs(off),
            Some(n) => match self.reg_ty(n) {
                Some(t) => Src::Reg(n.as_ref(), off, t),
                None => Src::Sym(n.as_ref(), off),
            },
        }
    }

    /// Static size of a shared variable visible here: `Some(None)` for a dynamic one.
    pub(super) fn shared_size(&self, n: &str) -> Option<Option<u64>> {
        if let Some(&s) = self.shared_fn.get(n) {
            return Some(Some(s));
        }
        self.info.shared.get(n).copied()
    }

    /// An in-range access to a named variable: unchanged, or given its space if it was generic.
    fn direct(&self, out: &mut Vec<O<'m>>, i: &Inst<'m>, sp: &'static str, was: Sp) {
        let mut j = i.clone();
        if was == Sp::Generic {
            j.mods = respace(&i.mods, sp);
        }
        out.push(O::new(Stmt::Inst(j)));
    }

    /// `%__sbx_a` := the address, 64 bits wide.
    pub(super) fn load(&self, out: &mut Vec<O<'m>>, src: &Src<'_>, line: u32) -> R<()> {
        self.load_into(out, "a", src, line)
    }

    /// `%__sbx_<dst>` := the address, 64 bits wide.
    pub(super) fn load_into(
        &self,
        out: &mut Vec<O<'m>>,
        dst: &str,
        src: &Src<'_>,
        line_no: u32,
    ) -> R<()> {
        let d = super::poll::sreg_name(dst);
        // `op %__sbx_<dst>, from, off;`, each of `from` and `off` when given.
        let line = |out: &mut Vec<O<'m>>, op: &str, from: Option<&str>, off: Option<i64>| {
            Self::text(out, None, |t| {
                put(t, op);
                t.push(' ');
                put(t, &d);
                if let Some(f) = from {
                    put(t, ", ");
                    put(t, f);
                }
                if let Some(k) = off {
                    put(t, ", ");
                    super::print::int(t, k);
                }
                put(t, ";\n");
            });
        };
        match *src {
            Src::Reg(r, off, t) => match t {
                "u64" | "b64" | "s64" if off == 0 => line(out, "mov.u64", Some(r), None),
                "u64" | "b64" | "s64" => line(out, "add.u64", Some(r), Some(off)),
                "u32" | "b32" | "s32" => {
                    line(out, "cvt.u64.u32", Some(r), None);
                    if off != 0 {
                        line(out, "add.u64", Some(&d), Some(off));
                    }
                }
                _ => {
                    return refused(
                        line_no,
                        format!("address register {r} is not 32 or 64 bits"),
                    );
                }
            },
            Src::Abs(off) => line(out, "mov.u64", None, Some(off)),
            Src::Sym(n, off) => {
                line(out, "mov.u64", Some(n), None);
                if off != 0 {
                    line(out, "add.u64", Some(&d), Some(off));
                }
            }
        }
        Ok(())
    }

    /// One global access of `w` bytes at `x`, fenced: `x` aligned down to `w` runs when `x -
    /// base` is at most `lim`, `(size & -MIN_ALIGN) - 1`, the one limit of every width (the
    /// base is MIN_ALIGN-aligned, so the aligned-down access ends in the arena); out of range
    /// the fault is noted and the access goes elsewhere.
    /// Two forms, chosen by measurement on the H200 (bench/RESULTS.md, session 19):
    /// - in a loop, a load or store runs under the compare's predicate and is skipped out of
    ///   range (a load's destinations zeroed first: no register shows what the hardware left in
    ///   it). The access then waits on the subtract and compare only, and the align does not
    ///   wait for them. A histogram's loop ran 1.11x native graph-replayed, against 1.16 with a
    ///   select;
    /// - elsewhere, and for atomics (ptxas branches around a predicated one), `x` or `base` is
    ///   selected, then aligned. With every access predicated, ptxas stopped issuing an unrolled
    ///   transpose's four straight-line loads together (1.27-1.30x, against 1.13-1.14); with
    ///   the align first, reduce_f64_dynamic ran 1.144x against 1.085.
    fn global_access(
        &self,
        out: &mut Vec<O<'m>>,
        i: &Inst<'m>,
        at: usize,
        x: &str,
        w: u64,
        guard: Option<&(Str<'m>, bool)>,
    ) {
        let dests = if self.in_loop() {
            self.zeroable_dests(i)
        } else {
            None
        };
        let Some(dests) = dests else {
            self.fence_global_into(out, "a", x, "%__sbx_lim", w, guard);
            self.access(out, i, at, "global", guard.cloned());
            return;
        };
        let aligned = if w > 1 { "%__sbx_a" } else { x };
        Self::text(out, None, |t| {
            offset_from_base(t, x);
            if w > 1 {
                put(t, "\tand.b64 %__sbx_a, ");
                put(t, x);
                put(t, ", ");
                super::print::int(t, -(w as i64));
                put(t, ";\n");
            }
        });
        self.past_limit(out, "%__sbx_p|%__sbx_q", "%__sbx_lim", guard);
        let on_p = Some(("%__sbx_p".into(), false));
        self.fault(out, on_p.clone());
        for (r, bits) in dests {
            Self::text(out, on_p.as_ref(), |t| {
                put(t, "mov.b");
                super::print::unsigned(t, bits.into());
                t.push(' ');
                put(t, r);
                put(t, ", 0;\n");
            });
        }
        let addr = Operand::Addr(Some(Str::borrowed(aligned)), 0);
        let run = Some(("%__sbx_q".into(), false));
        self.access_at(out, i, at, "global", run, addr);
    }

    /// For a load or store: the registers a load writes, each with its width in bits, which
    /// `global_access` zeroes before a load it may skip (none for a store); `None` for an
    /// atomic, or a load into something `mov` cannot zero.
    fn zeroable_dests<'i>(&self, i: &'i Inst<'m>) -> Option<Vec<(&'i str, u32)>> {
        match i.opcode.as_ref() {
            "st" => return Some(Vec::new()),
            "ld" | "ldu" => {}
            _ => return None,
        }
        let regs: Vec<&Operand> = match i.operands.first()? {
            Operand::Vec(v) => v.iter().collect(),
            o => vec![o],
        };
        regs.into_iter()
            .map(|o| {
                let Operand::Name(r) = o else { return None };
                // `mov.b16` is the narrowest: 8-bit and predicate registers cannot be zeroed.
                let bits = Ty::parse(self.reg_ty(r)?)?.bits();
                (bits >= 16).then_some((r.as_ref(), bits))
            })
            .collect()
    }

    /// `dst` := `%__sbx_x > lim`, and the access's own guard when it has one (with two
    /// destinations `p|q`, `q` is whether it runs: in range, and guarded in).
    pub(super) fn past_limit(
        &self,
        out: &mut Vec<O<'m>>,
        dst: &str,
        lim: &str,
        guard: Option<&(Str<'m>, bool)>,
    ) {
        Self::text(out, None, |t| {
            let setp = if guard.is_some() {
                "setp.gt.and.u64 "
            } else {
                "setp.gt.u64 "
            };
            put(t, setp);
            put(t, dst);
            put(t, ", %__sbx_x, ");
            put(t, lim);
            guard_operand(t, guard);
            put(t, ";\n");
        });
    }

    /// `setp.CMP.TY dst, a, b`, and `guard` with it when there is one (`setp.CMP.and.TY dst, a,
    /// b, guard`): whether the instruction under `guard` would run and the compare holds.
    pub(super) fn setp_under(
        &self,
        out: &mut Vec<O<'m>>,
        [cmp, ty]: [&str; 2],
        [dst, a, b]: [Operand<'_>; 3],
        guard: Option<&(Str<'m>, bool)>,
    ) {
        match guard {
            None => self.emit(out, None, "setp", &[cmp, ty], &[dst, a, b]),
            Some(g) => self.emit(out, None, "setp", &[cmp, "and", ty], &[dst, a, b, pred(g)]),
        }
    }

    /// `%__sbx_<dst>` := the address in register `x` fenced into `[base, base+lim]` (`lim` a
    /// register too), aligned down to `w`.
    pub(super) fn fence_global_into(
        &self,
        out: &mut Vec<O<'m>>,
        dst: &str,
        x: &str,
        lim: &str,
        w: u64,
        guard: Option<&(Str<'m>, bool)>,
    ) {
        // In range, the address itself (aligned down: the base is aligned to MIN_ALIGN, so it
        // stays >= base); out of range, the base. Selecting the address rather than rebuilding
        // it from a clamped offset saves a 64-bit add per access.
        Self::text(out, None, |t| offset_from_base(t, x));
        self.past_limit(out, "%__sbx_p", lim, guard);
        self.fault(out, Some(("%__sbx_p".into(), false)));
        Self::text(out, None, |t| {
            put(t, "selp.b64 %__sbx_");
            put(t, dst);
            put(t, ", %__sbx_base, ");
            put(t, x);
            put(t, ", %__sbx_p;\n");
            if w > 1 {
                put(t, "\tand.b64 %__sbx_");
                put(t, dst);
                put(t, ", %__sbx_");
                put(t, dst);
                put(t, ", ");
                super::print::int(t, -(w as i64));
                put(t, ";\n");
            }
        });
    }

    /// `dst = globals + goff + off`: the address of a relocated module variable (at `goff` in the
    /// Store's globals block) plus a constant offset.
    pub(super) fn global_addr(&self, out: &mut Vec<O<'m>>, dst: &str, goff: u64, off: i64) {
        Self::text(out, None, |t| {
            put(t, "add.u64 ");
            put(t, dst);
            put(t, ", %__sbx_globals, ");
            super::print::int(t, (goff as i64).wrapping_add(off));
            put(t, ";\n");
        });
    }

    /// A generic access: global, shared or local by `isspacep`, each fenced.
    fn generic(
        &mut self,
        out: &mut Vec<O<'m>>,
        i: &Inst<'m>,
        at: usize,
        src: &Src<'_>,
        w: u64,
    ) -> R<()> {
        let (end, ls, ll) = (self.label(), self.label(), self.label());
        let line = self.line;
        if let Some((g, neg)) = &i.guard {
            self.emit(
                out,
                Some((g.clone(), !neg)),
                "bra",
                &[],
                &[Operand::Name(end.clone().into())],
            );
        }
        self.load(out, src, i.line)?;
        let (a, p) = (sreg("a"), sreg("p"));
        let pg = Some(("%__sbx_p".into(), false));
        self.emit(out, None, "isspacep", &["shared"], &[p.clone(), a.clone()]);
        self.emit(
            out,
            pg.clone(),
            "bra",
            &[],
            &[Operand::Name(ls.clone().into())],
        );
        self.emit(out, None, "isspacep", &["local"], &[p.clone(), a.clone()]);
        self.emit(out, pg, "bra", &[], &[Operand::Name(ll.clone().into())]);
        self.global_access(out, i, at, "%__sbx_a", w, None);
        self.emit(out, None, "bra", &[], &[Operand::Name(end.clone().into())]);

        out.push(O::new(Stmt::Label(ls.into(), line)));
        self.emit(
            out,
            None,
            "cvta",
            &["to", "shared", "u64"],
            &[a.clone(), a.clone()],
        );
        let g = self.window_check(out, w, None, "slo", "shi");
        self.access(out, i, at, "shared", g);
        self.emit(out, None, "bra", &[], &[Operand::Name(end.clone().into())]);

        out.push(O::new(Stmt::Label(ll.into(), line)));
        if matches!(i.opcode.as_ref(), "atom" | "red") {
            // Atomics on local memory are undefined on NVIDIA: report, do nothing.
            self.fault(out, None);
        } else {
            self.emit(out, None, "cvta", &["to", "local", "u64"], &[a.clone(), a]);
            let g = self.window_check(out, w, None, "llo", "lhi");
            self.access(out, i, at, "local", g);
        }
        out.push(O::new(Stmt::Label(end.into(), line)));
        Ok(())
    }

    /// The original instruction on `[%__sbx_a]` in space `sp`, under `guard`.
    pub(super) fn access(
        &self,
        out: &mut Vec<O<'m>>,
        i: &Inst<'m>,
        at: usize,
        sp: &'static str,
        guard: Option<(Str<'m>, bool)>,
    ) {
        self.access_at(
            out,
            i,
            at,
            sp,
            guard,
            Operand::Addr(Some("%__sbx_a".into()), 0),
        );
    }

    /// The original instruction on `addr` in space `sp`, under `guard`.
    pub(super) fn access_at(
        &self,
        out: &mut Vec<O<'m>>,
        i: &Inst<'m>,
        at: usize,
        sp: &'static str,
        guard: Option<(Str<'m>, bool)>,
        addr: Operand,
    ) {
        respaced(&i.mods, sp, |mods| {
            Self::with_text(out, |t| {
                t.push('\t');
                // Only texture operands fail to print, and the allow-list refused those already.
                let _ = super::print::parts(
                    t,
                    guard.as_ref(),
                    &i.opcode,
                    mods,
                    &i.operands,
                    Some((at, &addr)),
                    i.line,
                );
                t.push('\n');
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&'static str]) -> Vec<Str<'static>> {
        v.iter().map(|&x| Str::borrowed(x)).collect()
    }

    #[test]
    fn respace_puts_the_space_after_memory_model_qualifiers() {
        let respaced = |m: &[&'static str], sp| {
            let v = respace(&s(m), sp).into_vec();
            // The borrowed form keeps the same modifiers, past the stack's few too.
            let long: Vec<Str> = s(m).into_iter().cycle().take(4 * m.len()).collect();
            let want: Vec<String> = respace(&long, sp).iter().map(|x| x.to_string()).collect();
            respaced(&long, sp, |b| assert_eq!(b, want.as_slice()));
            respaced(&s(m), sp, |b| assert_eq!(b, v.as_slice()));
            v
        };
        assert_eq!(
            respaced(&["volatile", "u32"], "shared"),
            s(&["volatile", "shared", "u32"])
        );
        assert_eq!(
            respaced(&["volatile", "u32"], "local"),
            s(&["local", "u32"])
        );
        assert_eq!(
            respaced(&["relaxed", "gpu", "add", "u32"], "global"),
            s(&["relaxed", "gpu", "global", "add", "u32"])
        );
        assert_eq!(
            respaced(&["global", "nc", "v4", "f32"], "global"),
            s(&["global", "nc", "v4", "f32"])
        );
        assert_eq!(
            respaced(&["const", "cs", "f32"], "shared"),
            s(&["shared", "f32"])
        );
        assert_eq!(
            respaced(&["relaxed", "sys", "local", "u32"], "local"),
            s(&["local", "u32"])
        );
        assert_eq!(
            respaced(&["acquire", "gpu"], "global"),
            s(&["acquire", "gpu", "global"])
        );
    }
}
