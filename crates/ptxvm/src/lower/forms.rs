//! Decoders for instructions with their own operand shapes: setp, bit-field ops, cvt, loads
//! and stores, atomics, calls and warp-synchronous ops.

use super::mods::Mods;
use super::{Ctx, R, Sym};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{
    AtomOp, BoolOp, CarryKind, KPARAM_BASE, NO_REG, Op, Preload, Rnd, ShflMode, Space, Src, Ty,
    VoteMode,
};

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
            (Operand::Pair(a, b), None) => (self.reg(a)?.0, self.reg(b)?.0),
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
        let setp = Op::Setp {
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
            Op::Selp {
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
                Op::CvtPack {
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

    pub(super) fn ldst(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
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
            // A scalar read of the kernel's own parameters is the same for every thread of the
            // launch: it becomes a move from a register preloaded once per warp.
            if space == Space::Param && addr.base.is_none() && n == 1 {
                let off = (addr.off as u64).wrapping_sub(KPARAM_BASE);
                if off
                    .checked_add(u64::from(ty.bytes()))
                    .is_none_or(|e| e > u64::from(self.kparam_bytes))
                {
                    return self.invalid("ld.param past the end of the kernel's parameters");
                }
                let r = self.preload(Preload::Param {
                    off: off as u32,
                    ty,
                })?;
                return self.emit(
                    i,
                    Op::Mov {
                        d: ds[0],
                        a: Src::Reg(r),
                    },
                );
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

    /// `cp.async.{ca,cg}.shared.global [dst], [src], 4|8|16`: the copy happens when issued (a
    /// global load then a shared store), so `commit_group`/`wait_group`/`wait_all` have nothing
    /// left to wait for.
    pub(super) fn cp_async(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        if !m.has("async") {
            return self.unsup("cp without .async");
        }
        if m.has("commit_group") || m.has("wait_group") || m.has("wait_all") {
            return self.emit(i, Op::Nop);
        }
        let ops = &i.operands;
        if !(m.has("shared") || m.has("shared::cta")) || !m.has("global") || ops.len() < 3 {
            return self.unsup("cp.async other than shared ← global with a copy size");
        }
        let size = match ops[2] {
            Operand::Int(v @ (4 | 8 | 16)) => v,
            _ => return self.invalid("cp.async copy size must be 4, 8 or 16"),
        };
        match ops.get(3) {
            None => {}
            Some(Operand::Int(v)) if *v == size && ops.len() == 4 => {}
            Some(_) => {
                return self.unsup("cp.async with a source size (zero fill) or a cache policy");
            }
        }
        let (dsp, dst) = self.addr(&ops[0], Space::Shared)?;
        let (ssp, src) = self.addr(&ops[1], Space::Global)?;
        let n = (size / 4) as u8;
        let mut ds = [self.sink; 4];
        for d in ds.iter_mut().take(usize::from(n)) {
            *d = self.new_reg()?;
        }
        self.emit(
            i,
            Op::Ld {
                space: ssp,
                ty: Ty::U32,
                n,
                ds,
                addr: src,
            },
        )?;
        let mut srcs = [Src::Imm(0); 4];
        for (s, d) in srcs.iter_mut().zip(ds).take(usize::from(n)) {
            *s = Src::Reg(d);
        }
        self.emit(
            i,
            Op::St {
                space: dsp,
                ty: Ty::U32,
                n,
                srcs,
                addr: dst,
            },
        )
    }

    pub(super) fn atom(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
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

    pub(super) fn call(&mut self, i: &ast::Inst) -> R<()> {
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
        if !self.frames.contains_key(callee)
            && (callee == super::ASSERT_FAIL || callee == super::VPRINTF)
        {
            return self.runtime_call(i, callee, args, rets);
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

    /// A call to one of the CUDA runtime's device functions the VM provides (`__assertfail`,
    /// `vprintf`): their arguments are `.param` variables in local memory, passed by offset.
    fn runtime_call(
        &mut self,
        i: &ast::Inst,
        callee: &str,
        args: &[Operand],
        rets: &[Operand],
    ) -> R<()> {
        let mut offsets = |list: &[Operand]| -> R<Vec<u32>> {
            let mut out = Vec::new();
            for o in list {
                match o {
                    Operand::Name(n) => match self.lookup(n)? {
                        Some(Sym::Local(v)) => out.push(v),
                        _ => {
                            return self.unsup(format!(
                                "{callee} arguments that are not .param variables"
                            ));
                        }
                    },
                    _ => {
                        return self
                            .unsup(format!("{callee} arguments that are not .param variables"));
                    }
                }
            }
            Ok(out)
        };
        let a = offsets(args)?;
        let r = offsets(rets)?;
        if callee == super::ASSERT_FAIL {
            if a.len() != 5 {
                return self.invalid("__assertfail takes 5 arguments");
            }
            return self.emit(
                i,
                Op::AssertFail {
                    args: a.into_boxed_slice(),
                },
            );
        }
        if a.len() != 2 || r.len() > 1 {
            return self.invalid("vprintf takes 2 arguments and returns one value");
        }
        self.emit(
            i,
            Op::Vprintf {
                format: a[0],
                args: a[1],
                ret: r.first().copied(),
            },
        )
    }

    pub(super) fn warp_op(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
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
                // Pre-Volta `shfl` (no .sync, no member mask) behaves as the full-warp form here.
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

    /// Extended-precision arithmetic: `add.cc`, `addc`, `sub.cc`, `subc`, `mad.cc`, `madc`,
    /// carrying through a hidden per-thread condition-code register.
    pub(super) fn carry(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let op = i.opcode.as_str();
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
            Op::Carry {
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
