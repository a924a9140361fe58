//! `ldmatrix` and `stmatrix` under the sandbox. Each lane's address names one 16-byte row of
//! an 8×8 b16 matrix in shared memory, whatever the type says, and the instruction is
//! `.sync.aligned`: the whole warp must run it together, so a fence that skips it on some
//! lanes (as a single `ld.shared` is skipped) would break the promise. Instead every lane's row
//! is checked against the shared window like a 16-byte access and, out of it, redirected to the
//! kernel's largest static shared variable (`%__sbx_st16`, window.rs), with the fault noted;
//! the instruction then runs unconditionally, as written, on `.shared` addresses. Lanes past
//! the rows an `.x1`/`.x2` form reads give no address (the hardware ignores theirs), so theirs
//! is replaced by the redirect target first: neither moved nor reported.
//!
//! `wmma.load`/`wmma.store` reach a whole tile: `major` rows (or columns) of `minor` elements,
//! `stride` elements apart. Each lane's pointer is aligned down to the fragment's size and its
//! stride to the fragment's size in elements (the ISA requires both; a legal kernel keeps
//! them), and the tile's span, `(major - 1) * stride + minor` elements, must lie in the arena
//! (global) or the shared window; otherwise the lane's pointer goes to the base (or the
//! redirect target) with a dense stride, and the fault is noted. Each lane checks its own
//! pointer and stride, which holds whichever lane's the hardware reads.

use super::fence::Src;
use super::print::O;
use super::put::put;
use super::rewrite::{Fx, R};
use crate::ast::{Inst, Operand};
use crate::ir::matrix::{Elem, Part, WmmaShape};
use crate::isa::Opcode;

/// Bytes of one row: what each lane's address names.
const ROW: u64 = 16;

/// The sandbox's refusal of `i`, its opcode first.
fn refused<T>(i: &Inst, what: impl Into<String>) -> R<T> {
    super::fence::refused(i.line, format!("{}: {}", i.opcode, what.into()))
}

/// `i` as written but for `mods` and `operands` (the address at `at` replaced by `addr`, when
/// given), under `guard`.
fn print_as<'m>(
    out: &mut Vec<O<'m>>,
    i: &Inst<'m>,
    (mods, operands): (&[&str], &[Operand<'_>]),
    replace: Option<(usize, &Operand<'_>)>,
) -> R<()> {
    let mut printed = Ok(());
    Fx::with_text(out, |t| {
        t.push('\t');
        printed = super::print::parts(
            t,
            i.guard.as_ref(),
            &i.opcode,
            mods,
            operands,
            replace,
            i.line,
        );
        t.push('\n');
    });
    printed
}

impl<'m> Fx<'_, 'm> {
    /// Rewrites one `ldmatrix` or `stmatrix`.
    pub(crate) fn matrix_access(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let at = usize::from(i.op == Some(Opcode::Ldmatrix));
        // The rewrite prints the registers as written: a relocated variable among them would
        // be left undeclared.
        super::globals::refuse_named_directly(&self.info.globals, i, Some(at))?;
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
                put(t, "cvta.to.shared.u64 %__sbx_a, %__sbx_a;\n")
            });
        }
        self.targets.borrow_mut().insert(ROW);
        if rows < 32 {
            Self::text(out, None, |t| {
                put(
                    t,
                    "mov.u32 %__sbx_o, %laneid;\n\tsetp.lt.u32 %__sbx_p, %__sbx_o, ",
                );
                super::print::unsigned(t, rows);
                put(
                    t,
                    ";\n\tselp.b64 %__sbx_a, %__sbx_a, %__sbx_st16, %__sbx_p;\n",
                );
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
        print_as(out, i, (&mods, &i.operands), Some((at, &addr)))
    }

    /// Rewrites one `wmma.load` or `wmma.store` (see the module's header).
    pub(crate) fn wmma_access(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let has = |f: &str| i.mods.iter().any(|m| m == f);
        let store = has("store");
        if !(2..=3).contains(&i.operands.len()) {
            return refused(i, "give it a fragment, an [address] and at most a stride");
        }
        // The address: a load's second operand, a store's first.
        let at = usize::from(!store);
        super::globals::refuse_named_directly(&self.info.globals, i, Some(at))?;
        let part = match () {
            _ if store => Part::C,
            _ if has("a") => Part::A,
            _ if has("b") => Part::B,
            _ => Part::C,
        };
        let Some(shape) = i.mods.iter().find_map(|m| WmmaShape::parse(m)) else {
            return refused(i, "a shape ptxvm does not run");
        };
        // The fragment's type and size: the ISA's alignment of each row, and so the fence's.
        let ty = i.mods.iter().filter_map(|m| Elem::parse(m)).next_back();
        let Some((ty, frag)) = ty.and_then(|t| Some((t, shape.fragment_bytes(part, t)?))) else {
            return refused(i, "a fragment type ptxvm does not run in this shape");
        };
        let esize = u64::from(ty.bits() / 8);
        let shared = has("shared") || has("shared::cta");
        if !shared && !has("global") {
            return refused(i, "give it a .global or .shared address");
        }
        if i.guard.is_some() {
            return refused(i, "under a predicate; run it on the whole warp");
        }
        let Some(Operand::Addr(base, off)) = i.operands.get(at) else {
            return refused(
                i,
                "memory operand must be [register+offset] or [variable+offset]",
            );
        };
        let src = self.src_of(base, *off);
        match src {
            Src::Reg(..) => {}
            Src::Sym(n, _) if shared && self.shared_size(n).is_some() => {}
            _ => return refused(i, "address it through a register (or a .shared variable)"),
        }
        let (rows, cols) = shape.dims(part);
        let row_major = has("row");
        let (major, minor) = if row_major {
            (rows, cols)
        } else {
            (cols, rows)
        };
        let (major, minor) = (major as u64, minor as u64);
        let step = frag / esize;
        let dense = minor.div_ceil(step) * step;
        let dense_span = ((major - 1) * dense + minor) * esize;
        if shared && !self.redirect_fits(frag, dense_span) {
            return refused(
                i,
                format!(
                    "needs a static .shared variable of at least {dense_span} bytes in its kernel \
                     (tiles outside the shared window are redirected there); not available in a \
                     .func"
                ),
            );
        }
        self.load(out, &src, i.line)?;
        let stride = i.operands.get(2);
        Self::text(out, None, |t| {
            put(t, "and.b64 %__sbx_a, %__sbx_a, ");
            super::print::int(
                t,
                if shared {
                    (1i64 << 32) - frag as i64
                } else {
                    -(frag as i64)
                },
            );
            put(t, ";\n\t");
            match stride {
                Some(Operand::Int(k)) => {
                    put(t, "mov.u32 %__sbx_o, ");
                    super::print::unsigned(t, (*k as u64 & 0xffff_ffff) & !(step - 1));
                }
                Some(Operand::Name(r)) => {
                    put(t, "and.b32 %__sbx_o, ");
                    put(t, r);
                    put(t, ", ");
                    super::print::int(t, -(step as i64));
                }
                _ => {
                    put(t, "mov.u32 %__sbx_o, ");
                    super::print::unsigned(t, minor);
                }
            }
            // %__sbx_b: the tile's span in bytes; %__sbx_x: the pointer's offset into the arena
            // or window; %__sbx_c: its size; out of it when x > c - b or b > c.
            put(t, ";\n\tmul.wide.u32 %__sbx_b, %__sbx_o, ");
            super::print::unsigned(t, (major - 1) * esize);
            put(t, ";\n\tadd.u64 %__sbx_b, %__sbx_b, ");
            super::print::unsigned(t, minor * esize);
            if shared {
                put(
                    t,
                    ";\n\tcvt.u64.u32 %__sbx_c, %__sbx_sl;\n\tsub.u64 %__sbx_x, %__sbx_a, %__sbx_c",
                );
                put(t, ";\n\tcvt.u64.u32 %__sbx_c, %__sbx_ss");
            } else {
                put(
                    t,
                    ";\n\tsub.u64 %__sbx_x, %__sbx_a, %__sbx_base;\n\tmov.u64 %__sbx_c, %__sbx_size",
                );
            }
            put(
                t,
                ";\n\tsub.u64 %__sbx_d, %__sbx_c, %__sbx_b;\n\tsetp.gt.u64 %__sbx_p, %__sbx_x, \
                 %__sbx_d;\n\tsetp.gt.or.u64 %__sbx_p, %__sbx_b, %__sbx_c, %__sbx_p;\n",
            );
        });
        self.fault(out, Some(("%__sbx_p".into(), false)));
        if shared {
            self.spans.borrow_mut().insert((true, 0));
            self.targets.borrow_mut().insert(frag);
        }
        Self::text(out, None, |t| {
            put(t, "selp.b64 %__sbx_a, ");
            put(t, if shared { "%__sbx_st" } else { "%__sbx_base" });
            if shared {
                super::print::unsigned(t, frag);
            }
            put(t, ", %__sbx_a, %__sbx_p;\n\tselp.u32 %__sbx_o, ");
            super::print::unsigned(t, dense);
            put(t, ", %__sbx_o, %__sbx_p;\n");
        });
        // The access as written, on the fenced pointer, with the stride always given.
        let mut ops = i.operands.clone();
        ops[at] = Operand::Addr(Some("%__sbx_a".into()), 0);
        let stride_reg = Operand::Name("%__sbx_o".into());
        if ops.len() == 2 {
            ops.push(stride_reg);
        } else {
            ops[2] = stride_reg;
        }
        let mods: Vec<&str> = i.mods.iter().map(|m| m.as_ref()).collect();
        print_as(out, i, (&mods, &ops), None)
    }
}
