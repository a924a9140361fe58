//! Operand resolution for the instruction decoder: registers, special registers, symbols,
//! immediates converted to the instruction's type, and memory operands.

use super::mods::Mods;
use super::{Ctx, R, Sym};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{
    Addr, ArithOp, Dyn, FMods, Inst, KPARAM_BASE, LOCAL_WINDOW, NO_REG, Op, Preload, Reg, Rnd,
    SHARED_WINDOW, Space, Src, Ty,
};

/// Special registers PTX defines that ptxvm does not model (clusters, perf counters…).
const UNMODELLED_SREGS: &[&str] = &[
    "%cluster",
    "%nclusterid",
    "%clusterid",
    "%is_explicit_cluster",
    "%envreg",
    "%pm",
    "%reserved_smem",
    "%aggr_smem_size",
    "%current_graph_exec",
    "%globaltimer_",
];

impl Ctx<'_> {
    pub(super) fn unsup<T>(&self, what: impl Into<String>) -> R<T> {
        Err(Error::Unsupported {
            line: self.line,
            what: what.into(),
        })
    }

    pub(super) fn invalid<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Error::Invalid {
            line: self.line,
            msg: msg.into(),
        })
    }

    /// Value of a special register, as a preloaded register or a freshly read temporary.
    pub(super) fn special(&mut self, name: &str) -> R<Option<Src>> {
        let axis = |s: &str| match s {
            "x" => Some(0u8),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        let (base, ax) = match name.split_once('.') {
            Some((b, a)) => (b, axis(a)),
            None => (name, None),
        };
        let p = match (base, ax) {
            ("%tid", Some(a)) => Preload::Tid(a),
            ("%ntid", Some(a)) => Preload::Ntid(a),
            ("%ctaid", Some(a)) => Preload::Ctaid(a),
            ("%nctaid", Some(a)) => Preload::Nctaid(a),
            ("%laneid", None) => Preload::LaneId,
            ("%warpid", None) => Preload::WarpId,
            ("%nwarpid", None) => Preload::NWarpId,
            ("%lanemask_eq", None) => Preload::LaneMaskEq,
            ("%lanemask_lt", None) => Preload::LaneMaskLt,
            ("%lanemask_le", None) => Preload::LaneMaskLe,
            ("%lanemask_gt", None) => Preload::LaneMaskGt,
            ("%lanemask_ge", None) => Preload::LaneMaskGe,
            ("%smid" | "%gridid", None) => Preload::Zero,
            ("%nsmid", None) => return Ok(Some(Src::Imm(1))),
            ("%dynamic_smem_size", None) => Preload::DynSmemSize,
            ("%total_smem_size", None) => Preload::TotalSmemSize,
            ("%clock" | "%clock64" | "%globaltimer", None) => {
                let which = match base {
                    "%clock" => Dyn::Clock,
                    "%clock64" => Dyn::Clock64,
                    _ => Dyn::GlobalTimer,
                };
                let d = self.new_reg()?;
                self.push(ArithOp::Dyn { d, which });
                return Ok(Some(Src::Reg(d)));
            }
            _ if UNMODELLED_SREGS.iter().any(|u| base.starts_with(u)) => {
                return self.unsup(format!("special register {name}"));
            }
            _ => return Ok(None),
        };
        Ok(Some(Src::Reg(self.preload(p)?)))
    }

    pub(super) fn reg(&mut self, name: &str) -> R<(Reg, Ty)> {
        match self.lookup(name)? {
            Some(Sym::Reg(r, t)) => Ok((r, t)),
            Some(_) => self.invalid(format!("{name} is a variable, not a register")),
            None => self.invalid(format!("undeclared register {name}")),
        }
    }

    pub(super) fn dst(&mut self, o: &Operand) -> R<Reg> {
        match o {
            Operand::Name(n) => Ok(self.reg(n)?.0),
            Operand::Sink => Ok(self.sink),
            _ => self.invalid("destination must be a register"),
        }
    }

    /// The operands of a three- or four-operand arithmetic form, `d, a, b[, c]`, lowered in that
    /// order; a missing `c` is 0. The caller has checked the count.
    pub(super) fn dabc(&mut self, ops: &[Operand], ty: Ty) -> R<(Reg, Src, Src, Src)> {
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], ty)?;
        let b = self.src(&ops[2], ty)?;
        let c = match ops.get(3) {
            Some(o) => self.src(o, ty)?,
            None => Src::Imm(0),
        };
        Ok((d, a, b, c))
    }

    /// Value of a named symbol used as an operand (its address in its own state space).
    pub(super) fn sym_value(&mut self, name: &str, off: i64) -> R<Src> {
        if let Some(Sym::Reg(r, _)) = self.lookup(name)?
            && off == 0
        {
            return Ok(Src::Reg(r));
        }
        if let Some(s) = self.special(name)? {
            return Ok(s);
        }
        let off = off as u64;
        match self.lookup(name)? {
            Some(Sym::Local(o)) => Ok(Src::Imm(u64::from(o).wrapping_add(off))),
            Some(Sym::Shared(o)) => Ok(Src::Imm(u64::from(o).wrapping_add(off))),
            Some(Sym::KParam(o)) => Ok(Src::Imm((KPARAM_BASE + u64::from(o)).wrapping_add(off))),
            Some(Sym::Global(g)) if off == 0 => Ok(Src::Reg(self.preload(Preload::GlobalAddr(g))?)),
            Some(Sym::DynShared) if off == 0 => Ok(Src::Reg(self.preload(Preload::DynSmemBase)?)),
            Some(_) => self.unsup(format!("symbol-plus-offset operand {name}+{off}")),
            None => self.invalid(format!("undeclared name {name}")),
        }
    }

    pub(super) fn src(&mut self, o: &Operand, ty: Ty) -> R<Src> {
        let imm = |v: u64| Ok(Src::Imm(v));
        match *o {
            Operand::Name(ref n) => self.sym_value(n, 0),
            Operand::Addr(Some(ref n), off) => self.sym_value(n, off),
            Operand::Int(v) => match ty {
                Ty::F32 => imm((v as f32).to_bits() as u64),
                Ty::F64 => imm((v as f64).to_bits()),
                _ => imm(v as u64),
            },
            Operand::F32Bits(b) => match ty {
                Ty::F64 => imm((f32::from_bits(b) as f64).to_bits()),
                _ => imm(u64::from(b)),
            },
            Operand::F64Bits(b) => match ty {
                Ty::F32 => imm(u64::from((f64::from_bits(b) as f32).to_bits())),
                _ => imm(b),
            },
            _ => self.invalid("expected a register or immediate operand"),
        }
    }

    /// Predicate operand, possibly negated (`!%p`).
    pub(super) fn pred(&mut self, o: &Operand) -> R<(Src, bool)> {
        match o {
            Operand::Not(n) => Ok((Src::Reg(self.reg(n)?.0), true)),
            _ => Ok((self.src(o, Ty::Pred)?, false)),
        }
    }

    /// Resolves a memory operand; may change the space (function params live in local memory).
    pub(super) fn addr(&mut self, o: &Operand, space: Space) -> R<(Space, Addr)> {
        let Operand::Addr(base, off) = o else {
            return self.invalid("expected a [address] operand");
        };
        let off = *off;
        let Some(name) = base else {
            return Ok((
                space,
                Addr {
                    base: None,
                    wide: true,
                    off,
                },
            ));
        };
        let abs = |sp: Space, o: u64| {
            Ok((
                sp,
                Addr {
                    base: None,
                    wide: true,
                    off: (o as i64).wrapping_add(off),
                },
            ))
        };
        match self.lookup(name)? {
            Some(Sym::Reg(r, t)) => Ok((
                space,
                Addr {
                    base: Some(r),
                    wide: t.bits() == 64,
                    off,
                },
            )),
            Some(Sym::Shared(o)) => match space {
                Space::Shared => abs(space, u64::from(o)),
                Space::Generic => abs(space, SHARED_WINDOW + u64::from(o)),
                _ => self.invalid(format!("{name} is a .shared variable")),
            },
            Some(Sym::Local(o)) => match space {
                Space::Local | Space::Param => abs(Space::Local, u64::from(o)),
                Space::Generic => abs(space, LOCAL_WINDOW + u64::from(o)),
                _ => self.invalid(format!("{name} is a .local/.param variable")),
            },
            Some(Sym::KParam(o)) => match space {
                Space::Param => abs(space, KPARAM_BASE + u64::from(o)),
                _ => self.unsup(format!(
                    "kernel parameter {name} accessed outside .param space"
                )),
            },
            Some(Sym::Global(g)) => match space {
                Space::Global | Space::Generic => {
                    let r = self.preload(Preload::GlobalAddr(g))?;
                    Ok((space, based(r, off)))
                }
                _ => self.invalid(format!("{name} is a .global/.const variable")),
            },
            Some(Sym::DynShared) => match space {
                Space::Shared => {
                    let r = self.preload(Preload::DynSmemBase)?;
                    Ok((space, based(r, off)))
                }
                _ => self.unsup("dynamic shared memory through a generic address"),
            },
            None => self.invalid(format!("undeclared name {name}")),
        }
    }

    pub(super) fn emit(&mut self, i: &ast::Inst, op: impl Into<Op>) -> R<()> {
        let (guard, guard_neg) = match &i.guard {
            Some((p, neg)) => (self.reg(p)?.0, *neg),
            None => (NO_REG, false),
        };
        self.code.push(Inst {
            op: op.into(),
            guard,
            guard_neg,
            line: self.line,
        });
        Ok(())
    }

    pub(super) fn err_ty(&self) -> Error {
        Error::Invalid {
            line: self.line,
            msg: "missing or bad type modifier".into(),
        }
    }

    pub(super) fn ty(&self, t: Option<Ty>) -> R<Ty> {
        t.ok_or_else(|| self.err_ty())
    }

    pub(super) fn fmods(&self, m: &Mods, ty: Ty, default_rn: bool) -> R<FMods> {
        let _ = default_rn;
        let rnd = m.rnd().unwrap_or(Rnd::Rn);
        if rnd != Rnd::Rn && !matches!(ty, Ty::F32 | Ty::F64) {
            return self.unsup("directed rounding on half-precision arithmetic");
        }
        Ok(FMods {
            rnd,
            ftz: m.has("ftz"),
            sat: m.has("sat"),
        })
    }

    pub(super) fn src_vec(&mut self, parts: &[Operand], ty: Ty) -> R<([Src; 4], u8)> {
        if parts.is_empty() || parts.len() > 4 {
            return self.unsup("vector operand of more than 4 elements");
        }
        let mut out = [Src::Imm(0); 4];
        for (k, p) in parts.iter().enumerate() {
            out[k] = match p {
                Operand::Sink => Src::Imm(0),
                _ => self.src(p, ty)?,
            };
        }
        Ok((out, parts.len() as u8))
    }

    pub(super) fn dst_vec(&mut self, parts: &[Operand]) -> R<([Reg; 4], u8)> {
        if parts.is_empty() || parts.len() > 4 {
            return self.unsup("vector operand of more than 4 elements");
        }
        let mut out = [self.sink; 4];
        for (k, p) in parts.iter().enumerate() {
            out[k] = self.dst(p)?;
        }
        Ok((out, parts.len() as u8))
    }
}

/// `[r + off]` with a 64-bit hidden base register.
fn based(r: Reg, off: i64) -> Addr {
    Addr {
        base: Some(r),
        wide: true,
        off,
    }
}
