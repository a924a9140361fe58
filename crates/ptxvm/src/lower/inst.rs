//! Decoding one PTX instruction (opcode, modifiers, operands) into `ir::Op`s: the opcode
//! dispatch and the arithmetic forms; operand shapes live in `operand`, the rest in `forms`.

use super::mods::{Mods, PTX_OPCODES, known_flag, wide};
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{FOp, FUn, IOp, IUn, MadKind, Op, Space, Ty};

impl Ctx<'_> {
    /// Decodes one instruction and appends its ops.
    pub(super) fn inst(&mut self, i: &ast::Inst) -> R<()> {
        let m = Mods::new(&i.mods);
        let ops = &i.operands;
        let n = ops.len();
        let need = |k: usize| -> R<()> {
            if n == k {
                Ok(())
            } else {
                Err(Error::Invalid {
                    line: i.line,
                    msg: format!("{} takes {k} operands, found {n}", i.opcode),
                })
            }
        };
        let op = i.opcode.as_str();
        if !PTX_OPCODES.contains(&op) {
            return self.invalid(format!("unknown instruction {op}"));
        }
        for f in &m.flags {
            if !known_flag(op, f) {
                return self.unsup(format!("modifier .{f} on {op}"));
            }
        }
        let ty = m.last_ty();
        if matches!(op, "addc" | "subc" | "madc") || m.has("cc") {
            return self.carry(i, &m);
        }
        match op {
            "mov" => {
                need(2)?;
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
                        let op = Op::Pack {
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
                        let op = Op::Unpack {
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
                        self.emit(i, Op::Mov { d, a })
                    }
                }
            }
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" | "copysign" => {
                need(3)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(
                    &ops[2],
                    if matches!(op, "shl" | "shr") {
                        Ty::U32
                    } else {
                        ty
                    },
                )?;
                if ty.is_float() {
                    let fop = match op {
                        "add" => FOp::Add,
                        "sub" => FOp::Sub,
                        "mul" => FOp::Mul,
                        "div" => FOp::Div,
                        "min" if m.has("NaN") => FOp::MinNaN,
                        "max" if m.has("NaN") => FOp::MaxNaN,
                        "min" => FOp::Min,
                        "max" => FOp::Max,
                        "copysign" => FOp::Copysign,
                        _ => return self.invalid(format!("{op} on a float type")),
                    };
                    let fm =
                        self.fmods(&m, ty, op == "div" && !m.has("approx") && !m.has("full"))?;
                    return self.emit(
                        i,
                        Op::FBin {
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
                    ("add", false) => IOp::Add,
                    ("add", true) => IOp::AddSat,
                    ("sub", false) => IOp::Sub,
                    ("sub", true) => IOp::SubSat,
                    ("mul", false) if m.has("hi") => IOp::MulHi,
                    ("mul", false) if m.has("wide") => IOp::MulWide,
                    ("mul", false) => IOp::MulLo,
                    ("div", false) => IOp::Div,
                    ("rem", false) => IOp::Rem,
                    ("min", false) => IOp::Min,
                    ("max", false) => IOp::Max,
                    ("and", false) => IOp::And,
                    ("or", false) => IOp::Or,
                    ("xor", false) => IOp::Xor,
                    ("shl", false) => IOp::Shl,
                    ("shr", false) => IOp::Shr,
                    _ => return self.unsup(format!("{op} with these modifiers")),
                };
                if sat && ty != Ty::S32 {
                    return self.unsup(format!("{op}.sat on .{ty:?}"));
                }
                self.emit(
                    i,
                    Op::IBin {
                        op: iop,
                        ty,
                        d,
                        a,
                        b,
                    },
                )
            }
            "mad" | "fma" => {
                need(4)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(&ops[2], ty)?;
                if ty.is_float() {
                    let fm = self.fmods(&m, ty, true)?;
                    let c = self.src(&ops[3], ty)?;
                    return self.emit(
                        i,
                        Op::Fma {
                            ty,
                            m: fm,
                            d,
                            a,
                            b,
                            c,
                        },
                    );
                }
                if op == "fma" {
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
                    Op::IMad {
                        kind,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "rcp" | "sqrt" | "rsqrt"
            | "ex2" | "lg2" | "sin" | "cos" | "tanh" => {
                need(2)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                if ty.is_float() {
                    let fop = match op {
                        "abs" => FUn::Abs,
                        "neg" => FUn::Neg,
                        "rcp" => FUn::Rcp,
                        "sqrt" => FUn::Sqrt,
                        "rsqrt" => FUn::Rsqrt,
                        "ex2" => FUn::Ex2,
                        "lg2" => FUn::Lg2,
                        "sin" => FUn::Sin,
                        "cos" => FUn::Cos,
                        "tanh" => FUn::Tanh,
                        _ => return self.invalid(format!("{op} on a float type")),
                    };
                    let exact = matches!(fop, FUn::Rcp | FUn::Sqrt) && !m.has("approx");
                    let fm = self.fmods(&m, ty, exact)?;
                    return self.emit(
                        i,
                        Op::FUn {
                            op: fop,
                            ty,
                            m: fm,
                            d,
                            a,
                        },
                    );
                }
                let iop = match op {
                    "abs" => IUn::Abs,
                    "neg" => IUn::Neg,
                    "not" => IUn::Not,
                    "cnot" => IUn::Cnot,
                    "popc" => IUn::Popc,
                    "clz" => IUn::Clz,
                    "brev" => IUn::Brev,
                    _ => return self.invalid(format!("{op} needs a float type")),
                };
                self.emit(i, Op::IUn { op: iop, ty, d, a })
            }
            "setp" | "set" => self.setp(i, &m),
            "selp" => {
                need(4)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                let b = self.src(&ops[2], ty)?;
                let (p, neg) = self.pred(&ops[3])?;
                let (a, b) = if neg { (b, a) } else { (a, b) };
                self.emit(i, Op::Selp { d, a, b, p })
            }
            "slct" => {
                need(4)?;
                let (dt, ct) = m.two_tys().ok_or_else(|| self.err_ty())?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], dt)?;
                let b = self.src(&ops[2], dt)?;
                let c = self.src(&ops[3], ct)?;
                self.emit(
                    i,
                    Op::Slct {
                        fsel: ct == Ty::F32,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            "bfe" | "bfi" | "prmt" => self.bits(i, op, ty),
            "testp" => {
                need(2)?;
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
                    Op::Testp {
                        op: which as u8,
                        ty,
                        d,
                        a,
                    },
                )
            }
            "cvt" => self.cvt(i, &m),
            "cvta" => {
                need(2)?;
                let space = m.space().unwrap_or(Space::Generic);
                if space == Space::Generic {
                    return self.invalid("cvta needs a state space");
                }
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::U64)?;
                self.emit(
                    i,
                    Op::Cvta {
                        to_generic: !m.has("to"),
                        space,
                        d,
                        a,
                    },
                )
            }
            "ld" | "ldu" | "st" => self.ldst(i, &m),
            "atom" | "red" => self.atom(i, &m),
            "bra" | "brx" => {
                if op == "brx" {
                    need(2)?;
                    let idx = self.src(&ops[0], Ty::U32)?;
                    let Operand::Name(t) = &ops[1] else {
                        return self.invalid("brx.idx needs a branch table");
                    };
                    self.brx_fixups.push((self.code.len(), t.clone(), i.line));
                    return self.emit(
                        i,
                        Op::Brx {
                            idx,
                            targets: Box::new([]),
                        },
                    );
                }
                need(1)?;
                let Operand::Name(l) = &ops[0] else {
                    return self.invalid("bra needs a label");
                };
                self.label_fixups.push((self.code.len(), l.clone(), i.line));
                self.emit(i, Op::Bra { target: 0 })
            }
            "cp" => self.cp_async(i, &m),
            "call" => self.call(i),
            "ret" => self.emit(i, Op::Ret),
            "exit" => self.emit(i, Op::Exit),
            "trap" | "brkpt" => self.emit(i, Op::Trap),
            "membar" | "fence" | "nanosleep" | "prefetch" | "prefetchu" | "pmevent" => {
                self.emit(i, Op::Nop)
            }
            "bar" | "barrier" => {
                if m.has("warp") {
                    return self.emit(i, Op::Nop);
                }
                if m.has("arrive") || m.has("red") {
                    return self.unsup(format!("{op}.arrive/.red"));
                }
                if n == 2 {
                    return self.unsup("barrier with an explicit thread count");
                }
                need(1)?;
                let id = self.src(&ops[0], Ty::U32)?;
                self.emit(i, Op::Bar { id })
            }
            "shfl" | "vote" | "activemask" | "match" => self.warp_op(i, &m),
            "redux" => {
                need(3)?;
                let ty = self.ty(ty)?;
                let rop = match () {
                    _ if m.has("add") => IOp::Add,
                    _ if m.has("min") => IOp::Min,
                    _ if m.has("max") => IOp::Max,
                    _ if m.has("and") => IOp::And,
                    _ if m.has("or") => IOp::Or,
                    _ if m.has("xor") => IOp::Xor,
                    _ => return self.unsup("redux operation"),
                };
                if ty.is_float() || ty.bits() != 32 {
                    return self.unsup(format!("redux on .{ty:?}"));
                }
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                self.emit(i, Op::Redux { op: rop, ty, d, a })
            }
            "lop3" => {
                need(5)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::B32)?;
                let b = self.src(&ops[2], Ty::B32)?;
                let c = self.src(&ops[3], Ty::B32)?;
                let Operand::Int(lut) = ops[4] else {
                    return self.invalid("lop3 needs an immediate lookup table");
                };
                self.emit(
                    i,
                    Op::Lop3 {
                        d,
                        a,
                        b,
                        c,
                        lut: lut as u8,
                    },
                )
            }
            "isspacep" => {
                need(2)?;
                let space = m.space().unwrap_or(Space::Generic);
                if space == Space::Generic || space == Space::Param {
                    return self.unsup("isspacep without .global/.shared/.local/.const");
                }
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], Ty::U64)?;
                self.emit(i, Op::IsSpace { space, d, a })
            }
            "shf" => {
                need(4)?;
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
                    Op::Shf {
                        left,
                        wrap,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            "bfind" => {
                need(2)?;
                let ty = self.ty(ty)?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], ty)?;
                self.emit(
                    i,
                    Op::Bfind {
                        ty,
                        shiftamt: m.has("shiftamt"),
                        d,
                        a,
                    },
                )
            }
            "dp4a" => {
                need(4)?;
                let (at, bt) = m.two_tys().ok_or_else(|| self.err_ty())?;
                let d = self.dst(&ops[0])?;
                let a = self.src(&ops[1], at)?;
                let b = self.src(&ops[2], bt)?;
                let c = self.src(&ops[3], Ty::U32)?;
                self.emit(
                    i,
                    Op::Dp4a {
                        sa: at.signed(),
                        sb: bt.signed(),
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            "mul24" | "mad24" | "sad" => {
                let ty = self.ty(ty)?;
                let want = if op == "mul24" { 3 } else { 4 };
                need(want)?;
                if (op != "sad" && !matches!(ty, Ty::U32 | Ty::S32)) || ty.is_float() {
                    return self.invalid(format!("{op} on .{ty:?}"));
                }
                let kind = match op {
                    "sad" => MadKind::Sad,
                    _ if m.has("hi") => MadKind::Hi24,
                    _ => MadKind::Lo24,
                };
                let (d, a, b, c) = self.dabc(ops, ty)?;
                self.emit(
                    i,
                    Op::IMad {
                        kind,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                )
            }
            _ if PTX_OPCODES.contains(&op) => self.unsup(format!("instruction {op}")),
            _ => self.invalid(format!("unknown instruction {op}")),
        }
    }
}
