//! `ldmatrix` and `stmatrix` under the sandbox. Each lane's address names one 16-byte row of
//! an 8×8 b16 matrix in shared memory, whatever the type says, and the instruction is
//! `.sync.aligned`: the whole warp must run it together, so a fence that skips it on some
//! lanes (as a single `ld.shared` is skipped) would break the promise. Instead every lane's row
//! is checked against the shared window like a 16-byte access and, out of it, redirected to the
//! kernel's largest static shared variable (`%__sbx_st16`, window.rs), with the fault noted;
//! the instruction then runs unconditionally, as written, on `.shared` addresses. Lanes past
//! the rows an `.x1`/`.x2` form reads give no address (the hardware ignores theirs), so theirs
//! is replaced by the redirect target first: neither moved nor reported.

use super::fence::Src;
use super::print::O;
use super::rewrite::{Fx, R};
use crate::ast::{Inst, Operand};
use crate::error::Error;
use crate::isa::Opcode;

/// Bytes of one row: what each lane's address names.
const ROW: u64 = 16;

fn refused<T>(i: &Inst, what: impl Into<String>) -> R<T> {
    Err(Error::Refused {
        line: i.line,
        what: format!("{}: {}", i.opcode, what.into()),
    })
}

impl<'m> Fx<'_, 'm> {
    /// Rewrites one `ldmatrix` or `stmatrix`.
    pub(crate) fn matrix_access(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let at = usize::from(i.op == Some(Opcode::Ldmatrix));
        let has = |f: &str| i.mods.iter().any(|m| m == f);
        let rows = if has("x4") {
            32
        } else if has("x2") {
            16
        } else if has("x1") {
            8
        } else {
            return refused(i, "give the matrix count (.x1, .x2 or .x4)");
        };
        let shared = has("shared") || has("shared::cta");
        if i.mods.iter().any(|m| {
            matches!(m.as_ref(), "global" | "local" | "const" | "param")
                || m.starts_with("shared::") && m != "shared::cta"
        }) {
            return refused(
                i,
                "its rows live in shared memory (.shared, or a generic address)",
            );
        }
        if i.operands.len() != 2 {
            return refused(i, "takes a register vector and one [address]");
        }
        let Some(Operand::Addr(base, off)) = i.operands.get(at) else {
            return refused(
                i,
                "memory operand must be [register+offset] or [variable+offset]",
            );
        };
        let src = self.src_of(base, *off);
        match src {
            Src::Abs(_) => return refused(i, "an absolute address; use a register or a variable"),
            Src::Sym(n, _) if self.shared_size(n).is_none() => {
                return refused(i, format!("{n} is not a .shared variable"));
            }
            _ => {}
        }
        if !self.redirect_fits(ROW, ROW) {
            return refused(
                i,
                "needs a static .shared variable of at least 16 bytes in its kernel (rows outside \
                 the shared window are redirected there); not available in a .func",
            );
        }
        self.load(out, &src, i.line)?;
        if !shared && matches!(src, Src::Reg(..)) {
            Self::text(out, None, |t| {
                t.push_str("cvta.to.shared.u64 %__sbx_a, %__sbx_a;\n")
            });
        }
        self.targets.borrow_mut().insert(ROW);
        if rows < 32 {
            Self::text(out, None, |t| {
                t.push_str("mov.u32 %__sbx_o, %laneid;\n\tsetp.lt.u32 %__sbx_p, %__sbx_o, ");
                super::print::unsigned(t, rows);
                t.push_str(";\n\tselp.b64 %__sbx_a, %__sbx_a, %__sbx_st16, %__sbx_p;\n");
            });
        }
        if let Some((q, _)) = self.window_check(out, ROW, i.guard.as_ref(), "slo", "shi") {
            self.redirect(out, "a", ROW, q);
        }
        // `.shared` goes right before the type (the last modifier), where the syntax puts it.
        let mut mods: Vec<&str> = i.mods.iter().map(|m| m.as_ref()).collect();
        if !shared {
            mods.insert(mods.len().saturating_sub(1), "shared");
        }
        let addr = Operand::Addr(Some("%__sbx_a".into()), 0);
        let guard = i.guard.as_ref();
        let mut printed = Ok(());
        Self::with_text(out, |t| {
            t.push('\t');
            printed = super::print::parts(
                t,
                guard,
                &i.opcode,
                &mods,
                &i.operands,
                Some((at, &addr)),
                i.line,
            );
            t.push('\n');
        });
        printed
    }
}
