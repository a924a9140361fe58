//! Decoders for the arithmetic instructions with their own operand shapes: setp/set, bit-field
//! ops, cvt and the carry chain (addc/subc/madc and `.cc`).

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::ir::{ArithOp, BitFn, BoolOp, CarryKind, NO_REG, Rnd, Src, Ty};
use crate::isa::Opcode;

impl Ctx<'_> {
    pub(super) fn setp(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        if ops.len() != 3 && ops.len() != 4 {
            return self.invalid("setp takes 3 or 4 operands");
        }
        // `set.cmp.dtype.stype` is setp into a hidden predicate, then a select of all-ones (or
        // 1.0f) versus zero.
        let set_ty = if i.opcode == "set" {
            match m.two_tys() {
                Some((dt, st)) => Some((dt, st)),
                None => return self.invalid("set needs a destination and a source type"),
            }
        } else {
            None
        };
        let ty = match set_ty {
            Some((_, st)) => st,
            None => self.ty(m.last_ty())?,
        };
        if matches!(ty, Ty::F16x2 | Ty::Bf16x2) {
            return self.unsup("setp on packed half-precision pairs");
        }
        let cmp = m.cmp().ok_or_else(|| self.err_ty())?;
        let (d, dn) = match (&ops[0], set_ty) {
            (Operand::Pair(p), None) => (self.reg(&p.0)?.0, self.reg(&p.1)?.0),
            (_, Some(_)) => (self.new_reg()?, NO_REG),
            (o, None) => (self.dst(o)?, NO_REG),
        };
        let a = self.src(&ops[1], ty)?;
        let b = self.src(&ops[2], ty)?;
        let comb = if m.has("and") {
            BoolOp::And
        } else if m.has("or") {
            BoolOp::Or
        } else if m.has("xor") {
            BoolOp::Xor
        } else {
            BoolOp::None
        };
        let (c, cneg) = if ops.len() == 4 {
            self.pred(&ops[3])?
        } else if comb != BoolOp::None {
            return self.invalid("setp with a boolean op needs a third predicate");
        } else {
            (Src::Imm(0), false)
        };
        let ftz = m.has("ftz");
        let setp = ArithOp::Setp {
            cmp,
            ty,
            ftz,
            d,
            dn,
            a,
            b,
            comb,
            c,
            cneg,
        };
        let Some((dt, _)) = set_ty else {
            return self.emit(i, setp);
        };
        let one = match dt {
            Ty::F32 => u64::from(1f32.to_bits()),
            Ty::U32 | Ty::S32 | Ty::B32 => 0xffff_ffff,
            _ => return self.invalid(format!("set with destination type .{dt:?}")),
        };
        let out = self.dst(&ops[0])?;
        self.push(setp);
        self.emit(
            i,
            ArithOp::Selp {
                d: out,
                a: Src::Imm(one),
                b: Src::Imm(0),
                p: Src::Reg(d),
            },
        )
    }

    pub(super) fn bits(&mut self, i: &ast::Inst, op: &str, ty: Option<Ty>) -> R<()> {
        let ops = &i.operands;
        let ty = self.ty(ty)?;
        let d = self.dst(ops.first().ok_or_else(|| self.err_ty())?)?;
        let s = |cx: &mut Self, k: usize, t: Ty| match ops.get(k) {
            Some(o) => cx.src(o, t),
            None => cx.invalid(format!("{op} is missing operand {k}")),
        };
        match op {
            "bfe" => {
                let (a, b, c) = (s(self, 1, ty)?, s(self, 2, Ty::U32)?, s(self, 3, Ty::U32)?);
                self.emit(i, ArithOp::Bfe { ty, d, a, b, c })
            }
            "bfi" => {
                let (a, b) = (s(self, 1, ty)?, s(self, 2, ty)?);
                let (c, e) = (s(self, 3, Ty::U32)?, s(self, 4, Ty::U32)?);
                self.emit(
                    i,
                    ArithOp::Bfi {
                        wide: ty.bits() == 64,
                        d,
                        a,
                        b,
                        c,
                        e,
                    },
                )
            }
            _ => {
                if i.mods.len() != 1 {
                    return self.unsup("prmt with a mode (f4e, b4e, rc8, ecl, ecr, rc16)");
                }
                let (a, b, c) = (s(self, 1, ty)?, s(self, 2, ty)?, s(self, 3, ty)?);
                self.emit(i, ArithOp::Prmt { d, a, b, c })
            }
        }
    }

    /// `bmsk.mode.b32 d, a, b`, `szext.mode.type d, a, b`, `fns.b32 d, mask, base, offset`.
    pub(super) fn bit_fn(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        let clamp = m.has("clamp");
        if op != Opcode::Fns && clamp == m.has("wrap") {
            return self.invalid(format!("{op} needs one of .clamp and .wrap"));
        }
        let ty = self.ty(m.last_ty())?;
        let f = match op {
            Opcode::Bmsk => BitFn::Bmsk { clamp },
            Opcode::Szext if matches!(ty, Ty::U32 | Ty::S32) => BitFn::Szext {
                clamp,
                signed: ty == Ty::S32,
            },
            Opcode::Szext => return self.invalid("szext takes .u32 or .s32"),
            _ => BitFn::Fns,
        };
        let n = if f == BitFn::Fns { 4 } else { 3 };
        self.need(i, n)?;
        let ops = &i.operands;
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], Ty::B32)?;
        let b = self.src(&ops[2], Ty::U32)?;
        let c = match ops.get(3) {
            Some(o) => self.src(o, Ty::S32)?,
            None => Src::Imm(0),
        };
        self.emit(i, ArithOp::Bits { f, d, a, b, c })
    }

    pub(super) fn cvt(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let (dt, st) = m.two_tys().ok_or_else(|| self.err_ty())?;
        if ops.len() == 3 && matches!(dt, Ty::F16x2 | Ty::Bf16x2) && st == Ty::F32 {
            if m.rnd().is_some_and(|r| r != Rnd::Rn) || m.has("relu") || m.has("satfinite") {
                return self.unsup("packed cvt other than .rn");
            }
            let d = self.dst(&ops[0])?;
            let a = self.src(&ops[1], st)?;
            let b = self.src(&ops[2], st)?;
            return self.emit(
                i,
                ArithOp::CvtPack {
                    bf: dt == Ty::Bf16x2,
                    d,
                    a,
                    b,
                },
            );
        }
        if ops.len() != 2 {
            return self.unsup("cvt with other than two operands (packed conversions)");
        }
        if matches!(dt, Ty::F16 | Ty::Bf16) && m.rnd().is_some_and(|r| r != Rnd::Rn) {
            return self.unsup("cvt to half precision with directed rounding");
        }
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], st)?;
        let int_rnd = m
            .flags
            .iter()
            .any(|f| matches!(*f, "rni" | "rzi" | "rmi" | "rpi"));
        let rnd = m.rnd().unwrap_or(if st.is_float() && !dt.is_float() {
            Rnd::Rz
        } else {
            Rnd::Rn
        });
        let op = ArithOp::Cvt {
            dt,
            st,
            rnd,
            int_rnd,
            sat: m.has("sat"),
            ftz: m.has("ftz"),
            d,
            a,
        };
        self.emit(i, op)
    }

    /// Extended-precision arithmetic: `add.cc`, `addc`, `sub.cc`, `subc`, `mad.cc`, `madc`,
    /// carrying through a hidden per-thread condition-code register.
    pub(super) fn carry(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let op = i.opcode.as_ref();
        let ty = self.ty(m.last_ty())?;
        if ty.is_float() || ty.bits() < 32 {
            return self.unsup(format!("{op}.cc on .{ty:?}"));
        }
        let kind = match op {
            "add" | "addc" => CarryKind::Add,
            "sub" | "subc" => CarryKind::Sub,
            _ if m.has("hi") => CarryKind::MadHi,
            _ => CarryKind::MadLo,
        };
        let want = if matches!(kind, CarryKind::Add | CarryKind::Sub) {
            3
        } else {
            4
        };
        let ops = &i.operands;
        if ops.len() != want {
            return self.invalid(format!("{op} takes {want} operands"));
        }
        let cc = match self.cc {
            Some(r) => r,
            None => {
                let r = self.new_reg()?;
                self.cc = Some(r);
                r
            }
        };
        let (d, a, b, c) = self.dabc(ops, ty)?;
        let cin = matches!(op, "addc" | "subc" | "madc");
        let cout = m.has("cc");
        self.emit(
            i,
            ArithOp::Carry {
                kind,
                cin,
                cout,
                ty,
                d,
                a,
                b,
                c,
                cc,
            },
        )
    }
}
