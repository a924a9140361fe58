//! Decoding one PTX instruction (opcode, modifiers, operands) into `ir::Op`s.

use super::{Ctx, R, Sym};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{
    Addr, AtomOp, BoolOp, Cmp, Dyn, FMods, FOp, FUn, IOp, IUn, Inst, KPARAM_BASE, LOCAL_WINDOW,
    MadKind, NO_REG, Op, Preload, Reg, Rnd, SHARED_WINDOW, ShflMode, Space, Src, Ty, VoteMode,
};

/// Modifiers that change nothing in a single-address-space, sequentially consistent interpreter.
const IGNORED: &[&str] = &[
    "uni", "nc", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "weak", "sys",
    "gpu", "cta", "cluster", "aligned", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "sync", "approx",
    "full", "noftz", "ptr", "to", "gl",
];

impl Ctx<'_> {
    fn unsup<T>(&self, what: impl Into<String>) -> R<T> {
        Err(Error::Unsupported {
            line: self.line,
            what: what.into(),
        })
    }
    fn invalid<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Error::Invalid {
            line: self.line,
            msg: msg.into(),
        })
    }

    /// Value of a special register, as a preloaded register or a freshly read temporary.
    fn special(&mut self, name: &str) -> R<Option<Src>> {
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
                self.push(Op::Dyn { d, which });
                return Ok(Some(Src::Reg(d)));
            }
            _ => return Ok(None),
        };
        Ok(Some(Src::Reg(self.preload(p)?)))
    }

    fn reg(&mut self, name: &str) -> R<(Reg, Ty)> {
        match self.lookup(name)? {
            Some(Sym::Reg(r, t)) => Ok((r, t)),
            Some(_) => self.invalid(format!("{name} is a variable, not a register")),
            None => self.invalid(format!("undeclared register {name}")),
        }
    }

    fn dst(&mut self, o: &Operand) -> R<Reg> {
        match o {
            Operand::Name(n) => Ok(self.reg(n)?.0),
            Operand::Sink => Ok(self.sink),
            _ => self.invalid("destination must be a register"),
        }
    }

    /// Value of a named symbol used as an operand (its address in its own state space).
    fn sym_value(&mut self, name: &str, off: i64) -> R<Src> {
        if let Some(s) = self.special(name)? {
            return Ok(s);
        }
        let off = off as u64;
        match self.lookup(name)? {
            Some(Sym::Reg(r, _)) if off == 0 => Ok(Src::Reg(r)),
            Some(Sym::Local(o)) => Ok(Src::Imm(u64::from(o).wrapping_add(off))),
            Some(Sym::Shared(o)) => Ok(Src::Imm(u64::from(o).wrapping_add(off))),
            Some(Sym::KParam(o)) => Ok(Src::Imm(KPARAM_BASE + u64::from(o) + off)),
            Some(Sym::Global(g)) if off == 0 => Ok(Src::Reg(self.preload(Preload::GlobalAddr(g))?)),
            Some(Sym::DynShared) if off == 0 => Ok(Src::Reg(self.preload(Preload::DynSmemBase)?)),
            Some(_) => self.unsup(format!("symbol-plus-offset operand {name}+{off}")),
            None => self.invalid(format!("undeclared name {name}")),
        }
    }

    fn src(&mut self, o: &Operand, ty: Ty) -> R<Src> {
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
    fn pred(&mut self, o: &Operand) -> R<(Src, bool)> {
        match o {
            Operand::Not(n) => Ok((Src::Reg(self.reg(n)?.0), true)),
            _ => Ok((self.src(o, Ty::Pred)?, false)),
        }
    }

    /// Resolves a memory operand; may change the space (function params live in local memory).
    fn addr(&mut self, o: &Operand, space: Space) -> R<(Space, Addr)> {
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
                    Ok((
                        space,
                        Addr {
                            base: Some(r),
                            wide: true,
                            off,
                        },
                    ))
                }
                _ => self.invalid(format!("{name} is a .global/.const variable")),
            },
            Some(Sym::DynShared) => match space {
                Space::Shared => {
                    let r = self.preload(Preload::DynSmemBase)?;
                    Ok((
                        space,
                        Addr {
                            base: Some(r),
                            wide: true,
                            off,
                        },
                    ))
                }
                _ => self.unsup("dynamic shared memory through a generic address"),
            },
            None => self.invalid(format!("undeclared name {name}")),
        }
    }

    fn emit(&mut self, i: &ast::Inst, op: Op) -> R<()> {
        let (guard, guard_neg) = match &i.guard {
            Some((p, neg)) => (self.reg(p)?.0, *neg),
            None => (NO_REG, false),
        };
        self.code.push(Inst {
            op,
            guard,
            guard_neg,
            line: self.line,
        });
        Ok(())
    }

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
        for f in &m.flags {
            if !known_flag(op, f) {
                return self.unsup(format!("modifier .{f} on {op}"));
            }
        }
        let ty = m.last_ty();
        match op {
            "mov" => {
                need(2)?;
                let ty = self.ty(ty)?;
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
            "setp" => self.setp(i, &m),
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
                if matches!(space, Space::Generic | Space::Param) {
                    return self.unsup("cvta without .global/.shared/.local/.const");
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
                    return self.unsup("brx.idx indirect branches");
                }
                need(1)?;
                let Operand::Name(l) = &ops[0] else {
                    return self.invalid("bra needs a label");
                };
                self.label_fixups.push((self.code.len(), l.clone(), i.line));
                self.emit(i, Op::Bra { target: 0 })
            }
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
            _ => self.unsup(format!("instruction {op}")),
        }
    }

    fn err_ty(&self) -> Error {
        Error::Invalid {
            line: self.line,
            msg: "missing or bad type modifier".into(),
        }
    }

    fn ty(&self, t: Option<Ty>) -> R<Ty> {
        t.ok_or_else(|| self.err_ty())
    }

    fn fmods(&self, m: &Mods, ty: Ty, default_rn: bool) -> R<FMods> {
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

    fn setp(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        if ops.len() != 3 && ops.len() != 4 {
            return self.invalid("setp takes 3 or 4 operands");
        }
        let ty = self.ty(m.last_ty())?;
        if matches!(ty, Ty::F16 | Ty::F16x2 | Ty::Bf16 | Ty::Bf16x2) {
            return self.unsup("setp on half-precision types");
        }
        let cmp = m.cmp().ok_or_else(|| self.err_ty())?;
        let (d, dn) = match &ops[0] {
            Operand::Pair(a, b) => (self.reg(a)?.0, self.reg(b)?.0),
            o => (self.dst(o)?, NO_REG),
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
        self.emit(
            i,
            Op::Setp {
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
            },
        )
    }

    fn bits(&mut self, i: &ast::Inst, op: &str, ty: Option<Ty>) -> R<()> {
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
                self.emit(i, Op::Bfe { ty, d, a, b, c })
            }
            "bfi" => {
                let (a, b) = (s(self, 1, ty)?, s(self, 2, ty)?);
                let (c, e) = (s(self, 3, Ty::U32)?, s(self, 4, Ty::U32)?);
                self.emit(
                    i,
                    Op::Bfi {
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
                self.emit(i, Op::Prmt { d, a, b, c })
            }
        }
    }

    fn cvt(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        if ops.len() != 2 {
            return self.unsup("cvt with other than two operands (packed conversions)");
        }
        let (dt, st) = m.two_tys().ok_or_else(|| self.err_ty())?;
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
        let op = Op::Cvt {
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

    fn ldst(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        if ops.len() != 2 {
            return self.invalid(format!("{} takes 2 operands", i.opcode));
        }
        let ty = self.ty(m.last_ty())?;
        let space = m.space().unwrap_or(Space::Generic);
        let nvec = m.vec();
        if i.opcode == "st" {
            let (space, addr) = self.addr(&ops[0], space)?;
            let (srcs, n) = match &ops[1] {
                Operand::Vec(v) => self.src_vec(v, ty)?,
                o => ([self.src(o, ty)?, Src::Imm(0), Src::Imm(0), Src::Imm(0)], 1),
            };
            if n != nvec {
                return self.invalid("vector width does not match operand count");
            }
            self.emit(
                i,
                Op::St {
                    space,
                    ty,
                    n,
                    srcs,
                    addr,
                },
            )
        } else {
            let (space, addr) = self.addr(&ops[1], space)?;
            let (ds, n) = match &ops[0] {
                Operand::Vec(v) => self.dst_vec(v)?,
                o => ([self.dst(o)?, self.sink, self.sink, self.sink], 1),
            };
            if n != nvec {
                return self.invalid("vector width does not match operand count");
            }
            self.emit(
                i,
                Op::Ld {
                    space,
                    ty,
                    n,
                    ds,
                    addr,
                },
            )
        }
    }

    fn atom(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let red = i.opcode == "red";
        let ops = &i.operands;
        let ty = self.ty(m.last_ty())?;
        let space = m.space().unwrap_or(Space::Generic);
        if matches!(space, Space::Local | Space::Param) {
            return self.unsup("atomics on .local/.param");
        }
        let aop = [
            ("add", AtomOp::Add),
            ("min", AtomOp::Min),
            ("max", AtomOp::Max),
            ("inc", AtomOp::Inc),
            ("dec", AtomOp::Dec),
            ("and", AtomOp::And),
            ("or", AtomOp::Or),
            ("xor", AtomOp::Xor),
            ("exch", AtomOp::Exch),
            ("cas", AtomOp::Cas),
        ]
        .iter()
        .find(|(w, _)| m.has(w))
        .map(|x| x.1)
        .ok_or_else(|| Error::Unsupported {
            line: i.line,
            what: "atomic operation".into(),
        })?;
        let float_ok = aop == AtomOp::Add && matches!(ty, Ty::F32 | Ty::F64);
        if (ty.is_float() && !float_ok) || ty.bits() < 32 || m.vec() != 1 {
            return self.unsup(format!("atom.{aop:?} on .{ty:?}"));
        }
        let k = usize::from(!red);
        let want = k + 2 + usize::from(aop == AtomOp::Cas);
        if ops.len() != want {
            return self.invalid(format!("{} takes {want} operands", i.opcode));
        }
        let d = if red { self.sink } else { self.dst(&ops[0])? };
        let (space, addr) = self.addr(&ops[k], space)?;
        let b = self.src(&ops[k + 1], ty)?;
        let c = if aop == AtomOp::Cas {
            self.src(&ops[k + 2], ty)?
        } else {
            Src::Imm(0)
        };
        self.emit(
            i,
            Op::Atom {
                space,
                op: aop,
                ty,
                d,
                addr,
                b,
                c,
            },
        )
    }

    fn call(&mut self, i: &ast::Inst) -> R<()> {
        let ops = &i.operands;
        let mut k = 0;
        let rets: &[Operand] = match ops.first() {
            Some(Operand::List(r)) => {
                k = 1;
                r
            }
            _ => &[],
        };
        let Some(Operand::Name(callee)) = ops.get(k) else {
            return self.invalid("call needs a function name");
        };
        let args: &[Operand] = match ops.get(k + 1) {
            Some(Operand::List(a)) => a,
            None => &[],
            Some(_) => return self.unsup("indirect calls through a prototype"),
        };
        if ops.len() > k + 2 {
            return self.unsup("indirect calls through a prototype");
        }
        let Some(fr) = self.frames.get(callee).cloned() else {
            if self.lookup(callee)?.is_some() {
                return self.unsup("indirect calls through a register");
            }
            return self.invalid(format!("call to undeclared function {callee}"));
        };
        if args.len() != fr.params.len() || rets.len() != fr.rets.len() {
            return self.invalid(format!(
                "call to {callee} with the wrong number of arguments"
            ));
        }
        let copies = |cx: &mut Self, list: &[Operand], slots: &[(u32, u32)], into: bool| {
            let mut out = Vec::new();
            for (o, &(off, size)) in list.iter().zip(slots) {
                let Operand::Name(n) = o else {
                    return cx.unsup("call arguments that are not .param variables");
                };
                let Some(Sym::Local(v)) = cx.lookup(n)? else {
                    return cx.unsup("call arguments that are not .param variables");
                };
                out.push(if into { (v, off, size) } else { (off, v, size) });
            }
            Ok(out.into_boxed_slice())
        };
        let a = copies(self, args, &fr.params, true)?;
        let r = copies(self, rets, &fr.rets, false)?;
        self.call_fixups.push((self.code.len(), callee.clone()));
        self.emit(i, Op::Call { target: 0, args: a })?;
        if !r.is_empty() {
            self.push(Op::CallRet { rets: r });
        }
        Ok(())
    }

    fn warp_op(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let (d, dp) = match ops.first() {
            Some(Operand::Pair(a, b)) => (self.reg(a)?.0, self.reg(b)?.0),
            Some(o) => (self.dst(o)?, NO_REG),
            None => return self.invalid("missing destination"),
        };
        let s = |cx: &mut Self, k: usize| match ops.get(k) {
            Some(o) => cx.src(o, Ty::U32),
            None => cx.invalid(format!("{} is missing operand {k}", i.opcode)),
        };
        match i.opcode.as_str() {
            "activemask" => self.emit(i, Op::Activemask { d }),
            "shfl" => {
                if !m.has("sync") {
                    return self.unsup("shfl without .sync");
                }
                let mode = if m.has("up") {
                    ShflMode::Up
                } else if m.has("down") {
                    ShflMode::Down
                } else if m.has("bfly") {
                    ShflMode::Bfly
                } else if m.has("idx") {
                    ShflMode::Idx
                } else {
                    return self.invalid("shfl mode");
                };
                let (a, b, c) = (s(self, 1)?, s(self, 2)?, s(self, 3)?);
                self.emit(
                    i,
                    Op::Shfl {
                        mode,
                        d,
                        dp,
                        a,
                        b,
                        c,
                    },
                )
            }
            "vote" => {
                let mode = if m.has("all") {
                    VoteMode::All
                } else if m.has("any") {
                    VoteMode::Any
                } else if m.has("uni") {
                    VoteMode::Uni
                } else if m.has("ballot") {
                    VoteMode::Ballot
                } else {
                    return self.invalid("vote mode");
                };
                let (a, neg) = self.pred(ops.get(1).ok_or_else(|| self.err_ty())?)?;
                self.emit(i, Op::Vote { mode, d, a, neg })
            }
            _ => {
                let wide = m.last_ty().is_some_and(|t| t.bits() == 64);
                let a = match ops.get(1) {
                    Some(o) => self.src(o, Ty::B64)?,
                    None => return self.invalid("match needs a value"),
                };
                self.emit(
                    i,
                    Op::Match {
                        all: m.has("all"),
                        wide,
                        d,
                        dp,
                        a,
                    },
                )
            }
        }
    }
}

/// The double-width type of `mul.wide`/`mad.wide`.
pub(crate) fn wide(t: Ty) -> Ty {
    match t {
        Ty::S16 => Ty::S32,
        Ty::U16 => Ty::U32,
        Ty::S32 => Ty::S64,
        _ => Ty::U64,
    }
}

/// Whether `flag` is a modifier this decoder understands for `op` (types are handled apart).
fn known_flag(op: &str, f: &str) -> bool {
    if IGNORED.contains(&f) || f.starts_with("L1::") || f.starts_with("L2::") {
        return true;
    }
    let rnd = matches!(f, "rn" | "rz" | "rm" | "rp" | "ftz" | "sat");
    match op {
        "cvt" => rnd || matches!(f, "rni" | "rzi" | "rmi" | "rpi"),
        "cvta" | "ld" | "ldu" | "st" => {
            matches!(
                f,
                "global" | "shared" | "local" | "const" | "param" | "v2" | "v4"
            )
        }
        "atom" | "red" => matches!(
            f,
            "global"
                | "shared"
                | "add"
                | "min"
                | "max"
                | "inc"
                | "dec"
                | "and"
                | "or"
                | "xor"
                | "exch"
                | "cas"
        ),
        "setp" => f == "ftz" || matches!(f, "and" | "or" | "xor") || Mods::cmp_of(f).is_some(),
        "mul" | "mad" => rnd || matches!(f, "lo" | "hi" | "wide"),
        "bar" | "barrier" => matches!(f, "warp" | "arrive" | "red" | "cta"),
        "shfl" => matches!(f, "up" | "down" | "bfly" | "idx"),
        "vote" => matches!(f, "all" | "any" | "uni" | "ballot"),
        "match" => matches!(f, "any" | "all"),
        "testp" => matches!(
            f,
            "finite" | "infinite" | "number" | "notanumber" | "normal" | "subnormal"
        ),
        "membar" | "fence" => matches!(f, "proxy" | "alias" | "acqrel"),
        _ => rnd,
    }
}

/// An instruction's modifiers split into types and flags.
pub(super) struct Mods<'a> {
    tys: Vec<Ty>,
    flags: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    fn new(mods: &'a [String]) -> Self {
        let mut tys = Vec::new();
        let mut flags = Vec::new();
        for m in mods {
            match Ty::parse(m) {
                Some(t) => tys.push(t),
                None => flags.push(m.as_str()),
            }
        }
        Mods { tys, flags }
    }
    fn has(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }
    fn last_ty(&self) -> Option<Ty> {
        self.tys.last().copied()
    }
    fn two_tys(&self) -> Option<(Ty, Ty)> {
        match self.tys.as_slice() {
            [a, b] => Some((*a, *b)),
            _ => None,
        }
    }
    fn vec(&self) -> u8 {
        if self.has("v4") {
            4
        } else if self.has("v2") {
            2
        } else {
            1
        }
    }
    fn space(&self) -> Option<Space> {
        self.flags.iter().find_map(|f| match *f {
            "global" | "const" => Some(Space::Global),
            "shared" => Some(Space::Shared),
            "local" => Some(Space::Local),
            "param" => Some(Space::Param),
            _ => None,
        })
    }
    fn rnd(&self) -> Option<Rnd> {
        self.flags.iter().find_map(|f| match *f {
            "rn" | "rni" => Some(Rnd::Rn),
            "rz" | "rzi" => Some(Rnd::Rz),
            "rm" | "rmi" => Some(Rnd::Rm),
            "rp" | "rpi" => Some(Rnd::Rp),
            _ => None,
        })
    }
    fn cmp_of(f: &str) -> Option<Cmp> {
        Some(match f {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" => Cmp::Lt,
            "le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "ge" => Cmp::Ge,
            "lo" => Cmp::Lo,
            "ls" => Cmp::Ls,
            "hi" => Cmp::Hi,
            "hs" => Cmp::Hs,
            "equ" => Cmp::Equ,
            "neu" => Cmp::Neu,
            "ltu" => Cmp::Ltu,
            "leu" => Cmp::Leu,
            "gtu" => Cmp::Gtu,
            "geu" => Cmp::Geu,
            "num" => Cmp::Num,
            "nan" => Cmp::Nan,
            _ => return None,
        })
    }
    fn cmp(&self) -> Option<Cmp> {
        self.flags.iter().find_map(|f| Self::cmp_of(f))
    }
}
