//! `cp.async` (sm_80's asynchronous copy from global to shared memory), fenced on both sides:
//! its source as a global access and its destination against the shared window, the copy
//! running only when the destination is in the window. A zero-filling copy's source is
//! reported only when the copy reads it. Its group waits pass through; every other `cp` form
//! is refused naming its line.

use super::fence::{Src, offset_from_base, refused};
use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R, numbered};
use crate::ast::{Inst, Operand, Stmt, Str};

/// What a `cp.async` reads of its source: all of it, a fixed number of bytes, as many as a
/// register says, or none when a predicate is set.
#[derive(Debug, Clone, Copy)]
enum Fill<'m> {
    All,
    Bytes(i64),
    Reg(&'m str),
    Ignore(&'m str),
}

impl<'m> Fx<'_, 'm> {
    /// `cp.async.{ca,cg}.shared.global [dst], [src], 4|8|16`: the source is fenced as a global
    /// access, the destination against the shared window, and the copy runs only when the
    /// destination is in the window. Its group waits pass through; other `cp` forms are refused.
    pub(crate) fn cp_async(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let has = |x: &str| i.mods.iter().any(|m| m == x);
        let wait = has("commit_group") || has("wait_group") || has("wait_all");
        if has("async") && wait && i.mods.len() == 2 {
            out.push(O::Inst(i));
            return Ok(());
        }
        let known = i.mods.iter().all(|m| {
            matches!(
                m.as_ref(),
                "async" | "ca" | "cg" | "shared" | "shared::cta" | "global"
            ) || m.starts_with("L2::")
        });
        let size = match i.operands.get(2) {
            Some(Operand::Int(v @ (4 | 8 | 16))) => *v,
            _ => 0,
        };
        let fill = match i.operands.get(3) {
            None => Some(Fill::All),
            Some(Operand::Int(v)) if *v == size => Some(Fill::All),
            Some(Operand::Int(v)) if (0..size).contains(v) => Some(Fill::Bytes(*v)),
            Some(Operand::Name(r)) => match self.reg_ty(r) {
                Some("pred") => Some(Fill::Ignore(r.as_ref())),
                Some("u32" | "b32" | "s32") => Some(Fill::Reg(r.as_ref())),
                _ => None,
            },
            Some(_) => None,
        };
        let Some(fill) = fill.filter(|_| i.operands.len() <= 4) else {
            return refused(
                i.line,
                "cp.async's fourth operand must be a source size (an integer at most the copy \
                 size, or a 32-bit register) or an ignore-src predicate; no cache policy",
            );
        };
        if !(has("async") && has("global") && known && size > 0)
            || !(has("shared") || has("shared::cta"))
        {
            return refused(
                i.line,
                "this cp form; the sandbox allows cp.async.{ca,cg}.shared.global [dst], [src], \
                 4|8|16{, src-size|ignore-src} and cp.async.commit_group/wait_group/wait_all",
            );
        }
        let (Some(Operand::Addr(db, doff)), Some(Operand::Addr(sb, soff))) =
            (i.operands.first(), i.operands.get(1))
        else {
            return refused(i.line, "cp.async operands must be [address]es");
        };
        let w = size as u64;
        let n = self.ngroups;
        self.ngroups += 1;
        let (g, q) = (numbered("g", n.into()), numbered("gq", n.into()));
        let gr = numbered("%__sbx_g", n.into());
        match self.src_of(sb, *soff) {
            Src::Sym(name, off) => {
                let Some(&(goff, _)) = self.info.globals.get(name) else {
                    return refused(i.line, format!("{name} is not a .global variable"));
                };
                self.global_addr(out, &gr, goff, off);
            }
            src => self.load_into(out, &g, &src, i.line)?,
        }
        match fill {
            Fill::All => self.fence_global_into(out, &g, &gr, "%__sbx_lim", w, i.guard.as_ref()),
            fill => self.fence_fill_source(out, &gr, w, fill, i.guard.as_ref()),
        }
        let dst = self.src_of(db, *doff);
        if let Src::Sym(name, _) = dst
            && self.shared_size(name).is_none()
        {
            return refused(i.line, format!("{name} is not a .shared variable"));
        }
        self.load_into(out, "a", &dst, i.line)?;
        let guard = self.window_into(out, "a", &q, w, w, i.guard.as_ref(), ("slo", "shi"));
        let mut j = i.clone();
        j.guard = guard;
        j.operands[0] = Operand::Addr(Some("%__sbx_a".into()), 0);
        j.operands[1] = Operand::Addr(Some(gr.into()), 0);
        // A register source size is cut to the copy size (the hardware's rule, not checked by
        // it), after the window check, whose scratch register it reuses.
        if let Fill::Reg(r) = fill {
            Self::text(out, None, |t| {
                put(t, "min.u32 %__sbx_o, ");
                put(t, r);
                put(t, ", ");
                super::print::unsigned(t, w);
                put(t, ";\n");
            });
            j.operands[3] = Operand::Name("%__sbx_o".into());
        }
        out.push(O::new(Stmt::Inst(j)));
        Ok(())
    }

    /// A zero-filling `cp.async`'s source, in register `x`: fenced as
    /// [`Self::fence_global_into`] does, but reported only when the copy reads from it (a
    /// source size of 0, or ignore-src set, reads nothing: CUTLASS-style code zero-fills the
    /// tiles past a matrix's edge so, with their addresses out of bounds). Out of range it
    /// goes to the base whether or not it is read.
    fn fence_fill_source(
        &self,
        out: &mut Vec<O<'m>>,
        x: &str,
        w: u64,
        fill: Fill<'_>,
        guard: Option<&(Str<'m>, bool)>,
    ) {
        Self::text(out, None, |t| offset_from_base(t, x));
        self.past_limit(out, "%__sbx_p", "%__sbx_lim", None);
        // %__sbx_o: nonzero when the copy reads its source; cleared where the guard stops it.
        let reads = match fill {
            Fill::All | Fill::Bytes(0) => None,
            Fill::Bytes(_) => Some(("mov.u32 %__sbx_o, 1", "")),
            Fill::Reg(r) => Some(("mov.u32 %__sbx_o, ", r)),
            Fill::Ignore(r) => Some(("selp.u32 %__sbx_o, 0, 1, ", r)),
        };
        if let Some((op, r)) = reads {
            Self::text(out, None, |t| {
                put(t, op);
                put(t, r);
                put(t, ";\n");
            });
            if let Some((g, neg)) = guard {
                let off = (g.clone(), !neg);
                Self::text(out, Some(&off), |t| put(t, "mov.u32 %__sbx_o, 0;\n"));
            }
            Self::text(out, None, |t| {
                put(t, "setp.ne.and.u32 %__sbx_q, %__sbx_o, 0, %__sbx_p;\n")
            });
            self.fault(out, Some(("%__sbx_q".into(), false)));
        }
        Self::text(out, None, |t| {
            put(t, "selp.b64 ");
            put(t, x);
            put(t, ", %__sbx_base, ");
            put(t, x);
            put(t, ", %__sbx_p;\n\tand.b64 ");
            put(t, x);
            put(t, ", ");
            put(t, x);
            put(t, ", ");
            super::print::int(t, -(w as i64));
            put(t, ";\n");
        });
    }
}
