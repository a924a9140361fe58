//! Decoders for the control family (`isa::Family::Control`: branches, calls, returns, traps,
//! barriers, memory-ordering no-ops) and the warp collectives (`isa::Family::Collective`; the
//! matrix ones are `matrix.rs`'s).

use super::mods::Mods;
use super::{Ctx, R, Sym};
use crate::ast::{self, Operand};
use crate::ir::{CollectiveOp, ControlOp, IOp, NO_REG, ShflMode, Ty, VoteMode};
use crate::isa::Opcode;

impl Ctx<'_> {
    /// Decodes a control instruction (`Family::Control`).
    pub(super) fn control(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let n = ops.len();
        match op {
            Opcode::Bra | Opcode::Brx => {
                if op == Opcode::Brx {
                    self.need(i, 2)?;
                    let idx = self.src(&ops[0], Ty::U32)?;
                    let Operand::Name(t) = &ops[1] else {
                        return self.invalid("brx.idx needs a branch table");
                    };
                    self.brx_fixups.push((self.code.len(), t.to_string(), i.line));
                    return self.emit(
                        i,
                        ControlOp::Brx {
                            idx,
                            targets: Box::new([]),
                        },
                    );
                }
                self.need(i, 1)?;
                let Operand::Name(l) = &ops[0] else {
                    return self.invalid("bra needs a label");
                };
                self.label_fixups.push((self.code.len(), l.to_string(), i.line));
                self.emit(i, ControlOp::Bra { target: 0 })
            }
            Opcode::Call => self.call(i),
            Opcode::Ret => self.emit(i, ControlOp::Ret),
            Opcode::Exit => self.emit(i, ControlOp::Exit),
            Opcode::Trap | Opcode::Brkpt => self.emit(i, ControlOp::Trap),
            Opcode::Membar | Opcode::Fence | Opcode::Nanosleep | Opcode::Pmevent => {
                self.emit(i, ControlOp::Nop)
            }
            Opcode::Bar | Opcode::Barrier => {
                if m.has("warp") {
                    return self.emit(i, ControlOp::WarpSync);
                }
                if m.has("arrive") || m.has("red") {
                    return self.unsup(format!("{op}.arrive/.red"));
                }
                if n == 2 {
                    return self.unsup("barrier with an explicit thread count");
                }
                self.need(i, 1)?;
                let id = self.src(&ops[0], Ty::U32)?;
                self.emit(i, ControlOp::Bar { id })
            }
            _ => self.invalid(format!("{op} is not a control instruction (the instruction table and the lowering disagree)")),
        }
    }

    /// Decodes a warp collective (`Family::Collective`).
    pub(super) fn collective(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let ty = m.last_ty();
        match op {
            Opcode::Shfl | Opcode::Vote | Opcode::Activemask | Opcode::Match => self.warp_op(i, m),
            Opcode::Elect => {
                self.need(i, 2)?;
                let Operand::Pair(pair) = &i.operands[0] else {
                    return self.invalid("elect.sync takes d|p, membermask");
                };
                let d = if pair.0.as_ref() == "_" {
                    self.sink
                } else {
                    self.reg(&pair.0)?.0
                };
                let p = self.reg(&pair.1)?.0;
                let m = self.src(&i.operands[1], Ty::U32)?;
                self.emit(i, CollectiveOp::Elect { d, p, m })
            }
            Opcode::Mma => self.mma(i),
            Opcode::Movmatrix => self.movmatrix(i),
            Opcode::Redux => {
                self.need(i, 3)?;
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
                let m = self.src(&ops[2], Ty::U32)?;
                self.emit(
                    i,
                    CollectiveOp::Redux {
                        op: rop,
                        ty,
                        d,
                        a,
                        m,
                    },
                )
            }
            _ => self.invalid(format!(
                "{op} is not a warp collective (the instruction table and the lowering disagree)"
            )),
        }
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
        if !self.frames.contains_key(&**callee)
            && (callee == super::ASSERT_FAIL || callee == super::VPRINTF)
        {
            return self.runtime_call(i, callee, args, rets);
        }
        let Some(fr) = self.frames.get(&**callee).cloned() else {
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
        self.call_fixups.push((self.code.len(), callee.to_string()));
        self.emit(i, ControlOp::Call { target: 0, args: a })?;
        if !r.is_empty() {
            self.push(ControlOp::CallRet { rets: r });
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
                ControlOp::AssertFail {
                    args: a.into_boxed_slice(),
                },
            );
        }
        if a.len() != 2 || r.len() > 1 {
            return self.invalid("vprintf takes 2 arguments and returns one value");
        }
        self.emit(
            i,
            ControlOp::Vprintf {
                format: a[0],
                args: a[1],
                ret: r.first().copied(),
            },
        )
    }

    /// A collective's member mask: the operand given, else (`vote` without `.sync`) every
    /// lane.
    fn member_mask(&mut self, o: Option<&Operand>) -> R<crate::ir::Src> {
        match o {
            Some(o) => self.src(o, Ty::U32),
            None => Ok(crate::ir::Src::Imm(u64::from(u32::MAX))),
        }
    }

    pub(super) fn warp_op(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let ops = &i.operands;
        let (d, dp) = match ops.first() {
            Some(Operand::Pair(p)) => (self.reg(&p.0)?.0, self.reg(&p.1)?.0),
            Some(o) => (self.dst(o)?, NO_REG),
            None => return self.invalid("missing destination"),
        };
        let s = |cx: &mut Self, k: usize| match ops.get(k) {
            Some(o) => cx.src(o, Ty::U32),
            None => cx.invalid(format!("{} is missing operand {k}", i.opcode)),
        };
        match i.opcode.as_ref() {
            "activemask" => self.emit(i, CollectiveOp::Activemask { d }),
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
                    CollectiveOp::Shfl {
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
                let m = self.member_mask(ops.get(2))?;
                self.emit(i, CollectiveOp::Vote { mode, d, a, neg, m })
            }
            _ => {
                let wide = m.last_ty().is_some_and(|t| t.bits() == 64);
                let a = match ops.get(1) {
                    Some(o) => self.src(o, Ty::B64)?,
                    None => return self.invalid("match needs a value"),
                };
                let members = self.member_mask(ops.get(2))?;
                self.emit(
                    i,
                    CollectiveOp::Match {
                        all: m.has("all"),
                        wide,
                        d,
                        dp,
                        a,
                        m: members,
                    },
                )
            }
        }
    }
}
