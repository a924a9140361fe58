//! Decoding one PTX instruction (opcode, modifiers, operands) into `ir` ops: validation against
//! the instruction table (`isa`), dispatch by family, and the arithmetic family; the memory and
//! control families and the warp collectives live in `memory` and `control`, operand shapes in
//! `operand`, the longer arithmetic forms in `forms`.

use super::mods::{Mods, wide};
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{ArithOp, FOp, FUn, IOp, IUn, MadKind, Space, Ty};
use crate::isa::{Family, Opcode};

impl Ctx<'_> {
    /// Decodes one instruction and appends its ops.
    pub(super) fn inst(&mut self, i: &ast::Inst) -> R<()> {
        let m = Mods::new(&i.mods);
        let Some(op) = i.op else {
            return self.invalid(format!("unknown instruction {}", i.opcode));
        };
        for f in &m.flags {
            if !op.modifiers().accepts(f) {
                return self.unsup(format!("modifier .{f} on {op}"));
            }
        }
        match op.family() {
            Family::Arith => self.arith(i, op, &m),
            Family::Memory => self.memory(i, op, &m),
            Family::Control => self.control(i, op, &m),
            Family::Collective => self.collective(i, op, &m),
            Family::Texture => self.texture(i, op, &m),
            Family::Unimplemented => self.unsup(format!("instruction {op}")),
        }
    }

    /// Checks that `i` has `k` operands.
    pub(super) fn need(&self, i: &ast::Inst, k: usize) -> R<()> {
        let n = i.operands.len();
        if n == k {
            Ok(())
        } else {
            Err(Error::Invalid {
                line: i.line,
                msg: format!("{} takes {k} operands, found {n}", i.opcode),
            })
        }
    }

    /// Decodes an arithmetic instruction (`Family::Arith`).
    pub(super) fn arith(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let ty = m.last_ty();
        if matches!(op, Opcode::Addc | Opcode::Subc | Opcode::Madc) || m.has("cc") {
            return self.carry(i, m);
        }
        match op {
            Opcode::Mov => {
                self.need(i, 2)?;
                let ty = self.ty(ty)?;
                if let Operand::Vec(v) = if matches!(ops[1], Operand::Vec(_)) {
                    &ops[1]
                } else {
                    &ops[0]
                } && (!v.len().is_power_of_two()
                    || v.len() < 2
                    || !(ty.bits() / v.len() as u32).is_multiple_of(8))
                {
                    return self.invalid(
                        "vector mov must split the type into 2 or 4 whole bytes-sized parts",
                    );
                }
                match (&ops[0], &ops[1]) {
                    (d, Operand::Vec(parts)) => {
                        let d = self.dst(d)?;
                        let (parts, cnt) = self.src_vec(parts, Ty::B64)?;
                        let op = ArithOp::Pack {
                            d,
                            parts,
                            n: cnt,
                            ebits: (ty.bits() / u32::from(cnt)) as u8,
                        };
                        self.emit(i, op)
                    }
                    (Operand::Vec(ds), a) => {
                        let a = self.src(a, ty)?;
                        let (ds, cnt) = self.dst_vec(ds)?;
                        let op = ArithOp::Unpack {
                            ds,
                            n: cnt,
                            a,
                            ebits: (ty.bits() / u32::from(cnt)) as u8,
                        };
                        self.emit(i, op)
                    }
                    (d, a) => {
                        let d = self.dst(d)?;
                        let a = self.src(a, ty)?;
                        self.emit(i, ArithOp::Mov { d, a })
                    }
                }
            }
            Opcode::Add | Opcode::Sub | Opcode::Mul | Opcode::Div | Opcode::Rem | Opcode::Min | Opcode::Max | Opcode::And | Opcode::Or | Opcode::Xor
            | Opcode::Shl | Opcode::Shr | Opcode::Copysign => {
                self.need(i, 3)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(
                    &ops[2],
                    if matches!(op, Opcode::Shl | Opcode::Shr) {
                        Ty::U32
                    } else {
                        ty
                    },
                )?;
                if ty.is_float() {
                    let fop = match op {
                        Opcode::Add => FOp::Add,
                        Opcode::Sub => FOp::Sub,
                        Opcode::Mul => FOp::Mul,
                        Opcode::Div => FOp::Div,
                        Opcode::Min if m.has("NaN") => FOp::MinNaN,
                        Opcode::Max if m.has("NaN") => FOp::MaxNaN,
                        Opcode::Min => FOp::Min,
                        Opcode::Max => FOp::Max,
                        Opcode::Copysign => FOp::Copysign,
                        _ => return self.invalid(format!("{op} on a float type")),
                    };
                    let fm =
                        self.fmods(m, ty, op == Opcode::Div && !m.has("approx") && !m.has("full"))?;
                    return self.emit(
                        i,
                        ArithOp::FBin {
                            op: fop,
                            ty,
                            m: fm,
                            d,
                            a,
                            b,
                        },
                    );
                }
                let sat = m.has("sat");
                let iop = match (op, sat) {
                    (Opcode::Add, false) => IOp::Add,
                    (Opcode::Add, true) => IOp::AddSat,
                    (Opcode::Sub, false) => IOp::Sub,
                    (Opcode::Sub, true) => IOp::SubSat,
                    (Opcode::Mul, false) if m.has("hi") => IOp::MulHi,
                    (Opcode::Mul, false) if m.has("wide") => IOp::MulWide,
                    (Opcode::Mul, false) => IOp::MulLo,
                    (Opcode::Div, false) => IOp::Div,
                    (Opcode::Rem, false) => IOp::Rem,
                    (Opcode::Min, false) => IOp::Min,
                    (Opcode::Max, false) => IOp::Max,
                    (Opcode::And, false) => IOp::And,
                    (Opcode::Or, false) => IOp::Or,
                    (Opcode::Xor, false) => IOp::Xor,
                    (Opcode::Shl, false) => IOp::Shl,
                    (Opcode::Shr, false) => IOp::Shr,
                    _ => return self.unsup(format!("{op} with these modifiers")),
                };
                if sat && ty != Ty::S32 {
                    return self.unsup(format!("{op}.sat on .{ty:?}"));
                }
                self.emit(
                    i,
                    ArithOp::IBin {
                        op: iop,
                        ty,
                        d,
                        a,
                        b,
                    },
                )
            }
            Opcode::Mad | Opcode::Fma => {
                self.need(i, 4)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(&ops[2], ty)?;
                if ty.is_float() {
                    let fm = self.fmods(m, ty, true)?;
                    let c = self.src(&ops[3], ty)?;
                    return self.emit(
                        i,
                        ArithOp::Fma {
                            ty,
                            m: fm,
                            d,
                            a,
                            b,
                            c,
                        },
                    );
                }
                if op == Opcode::Fma {
                    return self.invalid("fma needs a float type");
                }
                let kind = if m.has("hi") && m.has("sat") {
                    MadKind::HiSat
                } else if m.has("hi") {
                    MadKind::Hi
                } else if m.has("wide") {
                    MadKind::Wide
                } else {
                    MadKind::Lo
                };
                let cty = if kind == MadKind::Wide { wide(ty) } else { ty };
                let c = self.src(&ops[3], cty)?;
                self.emit(
                    i,
                    ArithOp::IMad {
                        kind,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            Opcode::Abs | Opcode::Neg | Opcode::Not | Opcode::Cnot | Opcode::Popc | Opcode::Clz | Opcode::Brev | Opcode::Rcp | Opcode::Sqrt | Opcode::Rsqrt
            | Opcode::Ex2 | Opcode::Lg2 | Opcode::Sin | Opcode::Cos | Opcode::Tanh => {
                self.need(i, 2)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                if ty.is_float() {
                    let fop = match op {
                        Opcode::Abs => FUn::Abs,
                        Opcode::Neg => FUn::Neg,
                        Opcode::Rcp => FUn::Rcp,
                        Opcode::Sqrt => FUn::Sqrt,
                        Opcode::Rsqrt => FUn::Rsqrt,
                        Opcode::Ex2 => FUn::Ex2,
                        Opcode::Lg2 => FUn::Lg2,
                        Opcode::Sin => FUn::Sin,
                        Opcode::Cos => FUn::Cos,
                        Opcode::Tanh => FUn::Tanh,
                        _ => return self.invalid(format!("{op} on a float type")),
                    };
                    let exact = matches!(fop, FUn::Rcp | FUn::Sqrt) && !m.has("approx");
                    let fm = self.fmods(m, ty, exact)?;
                    return self.emit(
                        i,
                        ArithOp::FUn {
                            op: fop,
                            ty,
                            m: fm,
                            d,
                            a,
                        },
                    );
                }
                let iop = match op {
                    Opcode::Abs => IUn::Abs,
                    Opcode::Neg => IUn::Neg,
                    Opcode::Not => IUn::Not,
                    Opcode::Cnot => IUn::Cnot,
                    Opcode::Popc => IUn::Popc,
                    Opcode::Clz => IUn::Clz,
                    Opcode::Brev => IUn::Brev,
                    _ => return self.invalid(format!("{op} needs a float type")),
                };
                self.emit(i, ArithOp::IUn { op: iop, ty, d, a })
            }
            Opcode::Setp | Opcode::Set => self.setp(i, m),
            Opcode::Selp => {
                self.need(i, 4)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(&ops[2], ty)?;
                let (p, neg) = self.pred(&ops[3])?;
                let (a, b) = if neg { (b, a) } else { (a, b) };
                self.emit(i, ArithOp::Selp { d, a, b, p })
            }
            Opcode::Slct => {
                self.need(i, 4)?;
                let (dt, ct) = m.two_tys().ok_or_else(|| self.err_ty())?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], dt)?;
                let b = self.src(&ops[2], dt)?;
                let c = self.src(&ops[3], ct)?;
                self.emit(
                    i,
                    ArithOp::Slct {
                        fsel: ct == Ty::F32,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            Opcode::Bfe | Opcode::Bfi | Opcode::Prmt => self.bits(i, op.name(), ty),
            Opcode::Bmsk | Opcode::Szext | Opcode::Fns => self.bit_fn(i, op, m),
            Opcode::Testp => {
                self.need(i, 2)?;
                let ty = self.ty(ty)?;
                let which = [
                    "finite",
                    "infinite",
                    "number",
                    "notanumber",
                    "normal",
                    "subnormal",
                ]
                .iter()
                .position(|w| m.has(w))
                .ok_or_else(|| Error::Unsupported {
                    line: i.line,
                    what: "testp kind".into(),
                })?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                self.emit(
                    i,
                    ArithOp::Testp {
                        op: which as u8,
                        ty,
                        d,
                        a,
                    },
                )
            }
            Opcode::Cvt => self.cvt(i, m),
            Opcode::Cvta => {
                self.need(i, 2)?;
                let space = m.space().unwrap_or(Space::Generic);
                if space == Space::Generic {
                    return self.invalid("cvta needs a state space");
                }
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::U64)?;
                self.emit(
                    i,
                    ArithOp::Cvta {
                        to_generic: !m.has("to"),
                        space,
                        d,
                        a,
                    },
                )
            }
            Opcode::Lop3 => {
                self.need(i, 5)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::B32)?;
                let b = self.src(&ops[2], Ty::B32)?;
                let c = self.src(&ops[3], Ty::B32)?;
                let Operand::Int(lut) = ops[4] else {
                    return self.invalid("lop3 needs an immediate lookup table");
                };
                self.emit(
                    i,
                    ArithOp::Lop3 {
                        d,
                        a,
                        b,
                        c,
                        lut: lut as u8,
                    },
                )
            }
            Opcode::Isspacep => {
                self.need(i, 2)?;
                let space = m.space().unwrap_or(Space::Generic);
                if space == Space::Generic || space == Space::Param {
                    return self.unsup("isspacep without .global/.shared/.local/.const");
                }
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::U64)?;
                self.emit(i, ArithOp::IsSpace { space, d, a })
            }
            Opcode::Shf => {
                self.need(i, 4)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::B32)?;
                let b = self.src(&ops[2], Ty::B32)?;
                let c = self.src(&ops[3], Ty::U32)?;
                let (left, wrap) = (m.has("l"), m.has("wrap"));
                if left == m.has("r") || wrap == m.has("clamp") {
                    return self.invalid("shf needs one of .l/.r and one of .wrap/.clamp");
                }
                self.emit(
                    i,
                    ArithOp::Shf {
                        left,
                        wrap,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            Opcode::Bfind => {
                self.need(i, 2)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                self.emit(
                    i,
                    ArithOp::Bfind {
                        ty,
                        shiftamt: m.has("shiftamt"),
                        d,
                        a,
                    },
                )
            }
            Opcode::Dp4a => {
                self.need(i, 4)?;
                let (at, bt) = m.two_tys().ok_or_else(|| self.err_ty())?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], at)?;
                let b = self.src(&ops[2], bt)?;
                let c = self.src(&ops[3], Ty::U32)?;
                self.emit(
                    i,
                    ArithOp::Dp4a {
                        sa: at.signed(),
                        sb: bt.signed(),
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            Opcode::Mul24 | Opcode::Mad24 | Opcode::Sad => {
                let ty = self.ty(ty)?;
                let want = if op == Opcode::Mul24 { 3 } else { 4 };
                self.need(i, want)?;
                if (op != Opcode::Sad && !matches!(ty, Ty::U32 | Ty::S32)) || ty.is_float() {
                    return self.invalid(format!("{op} on .{ty:?}"));
                }
                let kind = match op {
                    Opcode::Sad => MadKind::Sad,
                    _ if m.has("hi") => MadKind::Hi24,
                    _ => MadKind::Lo24,
                };
                let (d, a, b, c) = self.dabc(ops, ty)?;
                self.emit(
                    i,
                    ArithOp::IMad {
                        kind,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            _ => self.invalid(format!("{op} is not an arithmetic instruction (the instruction table and the lowering disagree)")),
        }
    }
}
