//! Shared fences for runs of accesses through one base register: unrolled loops read
//! `[%r+0]`, `[%r+64]`, `[%r+128]`… in one basic block. The first access of such a run fences
//! the whole span once into a group register; the later ones use `[group + d]`. A run ends at
//! a label, a branch or call, a nested block, or an instruction that writes the base register or
//! the accesses' guard predicate; all its accesses have the same space, width and guard, and
//! their offsets differ by multiples of the width.

use super::fence::{Sp, Src};
use super::names::same;
use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R, numbered};
use crate::ast::{Inst, Operand, Stmt, Str};
use crate::isa::Opcode;

/// A later access whose fence came with an earlier one.
pub(crate) struct Member<'m> {
    /// `%__sbx_g<n>`: the fenced address of the run's lowest offset (shared by the run's
    /// members: a copy each was an allocation each).
    reg: std::rc::Rc<str>,
    /// Offset from it.
    d: i64,
    /// Guard the access runs under.
    guard: Option<(Str<'m>, bool)>,
    /// Its space, and where its address operand is (`Fx::classify`'s first and third parts),
    /// found when the run was: a member is not classified again.
    sp: Sp,
    at: usize,
}

/// Most bytes one group fence covers (the host maps at least 64 KiB).
const MAX_SPAN: i64 = 4096;

/// Whether `o` names a register `hit` holds for.
fn mentions(o: &Operand, hit: &impl Fn(&str) -> bool) -> bool {
    match o {
        Operand::Name(x) => hit(x),
        Operand::Pair(p) => hit(&p.0) || hit(&p.1),
        Operand::Vec(v) | Operand::List(v) => v.iter().any(|x| mentions(x, hit)),
        _ => false,
    }
}

/// Whether `i` writes its first operand. `bar.red` (`bar.red.popc.u32 %r1, 0, %p1`) does,
/// where a plain `bar` has none: the instruction table speaks for the opcode, so it is asked
/// here first (an unknown opcode counts as writing).
fn writes_first(i: &Inst) -> bool {
    let op = i.op;
    let reduces =
        matches!(op, Some(Opcode::Bar | Opcode::Barrier)) && i.mods.iter().any(|m| m == "red");
    reduces || op.is_none_or(|o| o.writes_first_operand())
}

/// A call's return list: `call (%r4), f, (…)` to a `.func (.reg .b32 %res) f(…)` writes `%r4`
/// (`call` is no instruction that writes its first operand, so this is asked first).
fn call_returns<'i, 'a>(i: &'i Inst<'a>) -> Option<&'i Operand<'a>> {
    match (i.op, i.operands.first()) {
        (Some(Opcode::Call), Some(o @ Operand::List(_))) => Some(o),
        _ => None,
    }
}

/// The registers `i` may write (those [`writes`] holds for), each once, appended to `out`.
/// Inlined for nearly every instruction, which writes one register, named first, and has no
/// pair; the rest, and the frame they need, out of line.
#[inline]
pub(super) fn written_regs<'m>(i: &'m Inst<'m>, out: &mut Vec<&'m str>) {
    use Opcode::{Bar, Barrier, Call};
    // `writes_first` holds, and `call_returns` does not, for such an opcode.
    if let Some(op) = i.op
        && !matches!(op, Bar | Barrier | Call)
        && op.writes_first_operand()
        && let [Operand::Name(x), rest @ ..] = i.operands.as_slice()
        && !rest.iter().any(|o| matches!(o, Operand::Pair(..)))
    {
        out.push(x);
        return;
    }
    written_regs_rest(i, out);
}

#[inline(never)]
fn written_regs_rest<'m>(i: &'m Inst<'m>, out: &mut Vec<&'m str>) {
    fn names<'m>(o: &'m Operand<'m>, start: usize, out: &mut Vec<&'m str>) {
        let mut add = |n: &'m Str<'m>| {
            if !out[start..].contains(&n.as_ref()) {
                out.push(n);
            }
        };
        match o {
            Operand::Name(x) => add(x),
            Operand::Pair(p) => {
                add(&p.0);
                add(&p.1);
            }
            Operand::Vec(v) | Operand::List(v) => v.iter().for_each(|x| names(x, start, out)),
            _ => {}
        }
    }
    if let Some(rets) = call_returns(i) {
        let start = out.len();
        names(rets, start, out);
        return;
    }
    if !writes_first(i) {
        return;
    }
    let start = out.len();
    let pairs = i.operands.iter().filter(|o| matches!(o, Operand::Pair(..)));
    for o in i.operands.first().into_iter().chain(pairs) {
        names(o, start, out);
    }
}

/// Whether `i` may write register `n`.
pub(super) fn writes(i: &Inst, n: &str) -> bool {
    writes_any(i, |x| same(x, n))
}

/// Whether `i` may write a register `hit` holds for. Asked of every instruction a run or a
/// loop's proof looks at (group.rs, bounded.rs, ifconvert.rs), so the operands are looked at
/// once each: the first (or a call's return list), then any `|` pair after it.
pub(super) fn writes_any(i: &Inst, hit: impl Fn(&str) -> bool) -> bool {
    if let Some(rets) = call_returns(i) {
        return mentions(rets, &hit);
    }
    let [first, rest @ ..] = i.operands.as_slice() else {
        return false;
    };
    if !writes_first(i) {
        return false;
    }
    // A name (nearly every instruction's first operand) asked here, without a call.
    let first_hit = match first {
        Operand::Name(x) => hit(x),
        o => mentions(o, &hit),
    };
    first_hit
        || rest
            .iter()
            .any(|o| matches!(o, Operand::Pair(p) if hit(&p.0) || hit(&p.1)))
}

impl<'m> Fx<'_, 'm> {
    /// Emits `i` as a member of an earlier group, if it is one: its space and its address
    /// operand's place then come from the run (the operands checked against `globals` as `mem`
    /// checks every access's), where `mem` would have classified `i` again.
    pub(super) fn member(&mut self, i: &Inst<'m>, out: &mut Vec<O<'m>>) -> R<bool> {
        // Most accesses come when no run is open: no key hashed for them.
        if self.members.is_empty() {
            return Ok(false);
        }
        let Some(m) = self.members.remove(&(i as *const Inst)) else {
            return Ok(false);
        };
        let (sp, at) = (m.sp, m.at);
        super::globals::refuse_named_directly(&self.info.globals, i, Some(at))?;
        let space = match sp {
            Sp::Shared => "shared",
            Sp::Local => "local",
            _ => "global",
        };
        self.access_at(
            out,
            i,
            at,
            space,
            m.guard,
            Operand::Addr(Some(Str::borrowed(&m.reg)), m.d),
        );
        Ok(true)
    }

    /// Fences `i`, an access at `[r+off]` through register `r` of type `ty`, together with the
    /// later accesses of its run, if there are any; returns whether it did.
    pub(super) fn group(
        &mut self,
        i: &'m Inst<'m>,
        rest: &'m [Stmt<'m>],
        (sp, w, at): (Sp, u64, usize),
        (r, off, ty): (&str, i64, &str),
        out: &mut Vec<O<'m>>,
    ) -> R<bool> {
        let wi = w as i64;
        if writes(i, r) {
            // `ld %r, [%r]`: later accesses see the loaded value, not this base.
            return Ok(false);
        }
        // The run's later accesses, in the list the last run left (cleared): a list each was
        // an allocation for every access that began one.
        let mut members = std::mem::take(&mut self.run);
        members.clear();
        let (mut lo, mut hi) = (off, off.saturating_add(wi));
        let guard_reg = i.guard.as_ref().map(|g| g.0.as_ref());
        for s in rest {
            let Stmt::Inst(j) = s else { break };
            // By `op`, `opcode` looked up (the parser sets both): no names compared per
            // instruction of the run.
            use Opcode::{Atom, Bra, Brx, Call, Exit, Ld, Ldu, Red, Ret, St};
            if matches!(j.op, Some(Bra | Brx | Call | Ret | Exit)) {
                break;
            }
            let same_base = |o: &Operand| matches!(o, Operand::Addr(Some(b), _) if same(b, r));
            if matches!(j.op, Some(Ld | Ldu | St | Atom | Red))
                && j.guard == i.guard
                && j.operands.iter().take(2).any(same_base)
                && let Ok((sp2, w2, at2)) = Self::classify(j)
                && sp2 == sp
                && w2 == w
                && let Some(Operand::Addr(Some(b), o2)) = j.operands.get(at2)
                && same(b, r)
                && o2.wrapping_sub(off) % wi == 0
                && hi
                    .max(o2.saturating_add(wi))
                    .checked_sub(lo.min(*o2))
                    .is_some_and(|span| span <= MAX_SPAN)
                && !(sp == Sp::Local && matches!(j.op, Some(Atom | Red)))
            {
                members.push((j, *o2, at2));
                lo = lo.min(*o2);
                hi = hi.max(o2.saturating_add(wi));
            }
            // The base or the guard, in one look at what `j` writes.
            if writes_any(j, |x| same(x, r) || guard_reg.is_some_and(|g| same(x, g))) {
                break;
            }
        }
        if members.is_empty() {
            self.run = members;
            return Ok(false);
        }
        let n = self.ngroups;
        self.ngroups += 1;
        let (g, span) = (numbered("g", n.into()), (hi - lo) as u64);
        let reg = numbered("%__sbx_g", n.into());
        self.load_into(out, &g, &Src::Reg(r, lo, ty), i.line)?;
        let (space, guard) = match sp {
            Sp::Shared | Sp::Local => {
                let win = if sp == Sp::Shared {
                    ("slo", "shi")
                } else {
                    ("llo", "lhi")
                };
                let q = numbered("gq", n.into());
                let mut guard = self.window_into(out, &g, &q, w, span, i.guard.as_ref(), win);
                // A run of shared loads out of the window reads from its start instead of being
                // skipped (as a single load does, window.rs): predicated loads are ones ptxas
                // neither hoists nor merges into vector loads (matmul_tiled's unrolled row read
                // went from 4 LDS.128 to 16 predicated LDS, and 32 to 64 registers). The span
                // read at the redirect target must lie in the window (`redirect_fits`).
                let ld = Some(Opcode::Ld);
                let loads = i.op == ld && members.iter().all(|(j, ..)| j.op == ld);
                if let Some((gq, _)) = guard.clone()
                    && sp == Sp::Shared
                    && loads
                    && self.redirect_fits(w, span)
                {
                    self.redirect(out, &g, w, gq);
                    guard = i.guard.clone();
                }
                (if sp == Sp::Shared { "shared" } else { "local" }, guard)
            }
            _ => {
                Self::text(out, None, |t| {
                    put(t, "sub.u64 %__sbx_b, %__sbx_size, ");
                    super::print::int(t, span as i64);
                    put(t, ";\n");
                });
                self.fence_global_into(out, &g, &reg, "%__sbx_b", w, i.guard.as_ref());
                ("global", i.guard.clone())
            }
        };
        self.access_at(
            out,
            i,
            at,
            space,
            guard.clone(),
            Operand::Addr(Some(Str::borrowed(&reg)), off - lo),
        );
        let reg: std::rc::Rc<str> = reg.into();
        // Room for the run at once: grown member by member, the map rehashed as it went.
        self.members.reserve(members.len());
        for (j, o2, at) in members.drain(..) {
            self.members.insert(
                j as *const Inst,
                Member {
                    reg: reg.clone(),
                    d: o2 - lo,
                    guard: guard.clone(),
                    sp,
                    at,
                },
            );
        }
        self.run = members;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::ast::Stmt;

    #[test]
    fn written_regs_lists_once_each_register_writes_holds_for() {
        let text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\
                    setp.lt.u32 %p1|%p2, %r1, %r2;\nld.global.v2.u32 {%r1, %r1}, [%rd1];\n\
                    st.global.u32 [%rd1], %r1;\nmov.u32 %r3, %r3;\nadd.u32 %r4, %r1, 1;\n\
                    bar.sync 0;\nret;\n}\n";
        let m = crate::parse::parse(&crate::lex::lex(text).unwrap()).unwrap();
        let names = ["%p1", "%p2", "%r1", "%r2", "%r3", "%r4", "%rd1"];
        for s in m.funcs[0].body.as_deref().unwrap() {
            let Stmt::Inst(i) = s else { continue };
            let mut out = Vec::new();
            super::written_regs(i, &mut out);
            let want: Vec<&str> = names.into_iter().filter(|n| super::writes(i, n)).collect();
            let mut got = out.clone();
            got.sort_unstable();
            got.dedup();
            assert_eq!(got.len(), out.len(), "{} lists a register twice", i.opcode);
            assert_eq!(got, want, "{}", i.opcode);
        }
    }

    /// The sandbox refuses register arguments and returns (allow.rs), so this only keeps the
    /// two helpers true of a call should that rule ever loosen.
    #[test]
    fn a_call_writes_its_return_registers_and_not_its_arguments() {
        let text = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\
                    call (%r4), f, (%r1);\ncall f, (%r2);\nret;\n}\n";
        let m = crate::parse::parse(&crate::lex::lex(text).unwrap()).unwrap();
        let body = m.funcs[0].body.as_deref().unwrap();
        let calls: Vec<_> = body
            .iter()
            .filter_map(|s| match s {
                Stmt::Inst(i) if i.opcode == "call" => Some(i),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        super::written_regs(calls[0], &mut out);
        assert_eq!(out, ["%r4"]);
        assert!(super::writes(calls[0], "%r4") && !super::writes(calls[0], "%r1"));
        out.clear();
        super::written_regs(calls[1], &mut out);
        assert!(out.is_empty() && !super::writes(calls[1], "%r2"));
    }
}
