//! Decoders for the memory family (`isa::Family::Memory`): loads and stores, atomics and
//! reductions, `cp.async`, and prefetch hints (which decode to nothing).

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::error::Error;
use crate::ir::{
    Addr, ArithOp, AtomOp, ControlOp, CpFill, KPARAM_BASE, MemoryOp, Preload, Space, Src, Ty,
};
use crate::isa::Opcode;

impl Ctx<'_> {
    /// Decodes a memory instruction (`Family::Memory`).
    pub(super) fn memory(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        match op {
            Opcode::Ld | Opcode::Ldu | Opcode::St => self.ldst(i, m),
            Opcode::Atom | Opcode::Red => self.atom(i, m),
            Opcode::Cp => self.cp_async(i, m),
            Opcode::Ldmatrix | Opcode::Stmatrix => self.matrix_access(i, op, m),
            Opcode::Wmma => self.wmma(i, m),
            Opcode::Mbarrier => self.mbarrier(i, m),
            Opcode::Prefetch | Opcode::Prefetchu => self.emit(i, ControlOp::Nop),
            _ => self.invalid(format!(
                "{op} is not a memory instruction (the instruction table and the lowering disagree)"
            )),
        }
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
            let declared = space;
            let (space, addr) = self.addr(&ops[0], space)?;
            self.unguarded_call_param(i, declared, &addr)?;
            let (srcs, n) = match &ops[1] {
                Operand::Vec(v) => self.src_vec(v, ty)?,
                o => ([self.src(o, ty)?, Src::Imm(0), Src::Imm(0), Src::Imm(0)], 1),
            };
            if n != nvec {
                return self.invalid("vector width does not match operand count");
            }
            self.emit(
                i,
                MemoryOp::St {
                    space,
                    ty,
                    n,
                    srcs,
                    addr,
                },
            )
        } else {
            let declared = space;
            let (space, addr) = self.addr(&ops[1], space)?;
            self.unguarded_call_param(i, declared, &addr)?;
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
                    ArithOp::Mov {
                        d: ds[0],
                        a: Src::Reg(r),
                    },
                );
            }
            self.emit(
                i,
                MemoryOp::Ld {
                    space,
                    ty,
                    n,
                    ds,
                    addr,
                },
            )
        }
    }

    /// Refuses a guarded `ld.param`/`st.param` (`declared` is the instruction's own space) of
    /// a call's argument or result variable, as ptxas does ("Illegal to predicate instruction
    /// 'ld.param'"): a module softcuda ran would otherwise fail to load on NVIDIA. A kernel's
    /// or function's own parameters may be guarded.
    fn unguarded_call_param(&self, i: &ast::Inst, declared: Space, addr: &Addr) -> R<()> {
        if i.guard.is_none() || declared != Space::Param || addr.base.is_some() {
            return Ok(());
        }
        let at = addr.off as u64;
        let in_call_param = self
            .call_params
            .iter()
            .any(|&(off, size)| (u64::from(off)..u64::from(off) + u64::from(size)).contains(&at));
        if in_call_param {
            return self.invalid(format!(
                "{}.param of a call's argument or result under a guard: PTX allows none \
                 (ptxas refuses it); guard the call, and move the result under the guard",
                i.opcode
            ));
        }
        Ok(())
    }

    /// `cp.async.{ca,cg}.shared.global [dst], [src], 4|8|16`: the copy happens when issued (a
    /// global load then a shared store), so `commit_group`/`wait_group`/`wait_all` have nothing
    /// left to wait for.
    pub(super) fn cp_async(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        if !m.has("async") {
            return self.unsup("cp without .async");
        }
        if m.has("commit_group") || m.has("wait_group") || m.has("wait_all") {
            return self.emit(i, ControlOp::Nop);
        }
        if m.has("mbarrier") && m.has("arrive") {
            return self.cp_async_arrive(i, m);
        }
        let ops = &i.operands;
        if !(m.has("shared") || m.has("shared::cta")) || !m.has("global") || ops.len() < 3 {
            return self.unsup("cp.async other than shared ← global with a copy size");
        }
        let size = match ops[2] {
            Operand::Int(v @ (4 | 8 | 16)) => v,
            _ => return self.invalid("cp.async copy size must be 4, 8 or 16"),
        };
        if ops.len() > 4 {
            return self.unsup("cp.async with a cache policy");
        }
        let (dsp, dst) = self.addr(&ops[0], Space::Shared)?;
        let (ssp, src) = self.addr(&ops[1], Space::Global)?;
        // A fourth operand: the bytes to read (the rest zero-filled), or a predicate that,
        // set, reads none (`ignore-src`).
        let (src_size, ignore) = match ops.get(3) {
            None => (None, Src::Imm(0)),
            Some(Operand::Int(v)) if *v == size => (None, Src::Imm(0)),
            Some(Operand::Int(v)) if (0..size).contains(v) => {
                (Some(Src::Imm(*v as u64)), Src::Imm(0))
            }
            Some(o @ Operand::Name(n)) => match self.reg(n)? {
                (_, Ty::Pred) => (Some(Src::Imm(size as u64)), self.src(o, Ty::Pred)?),
                _ => (Some(self.src(o, Ty::U32)?), Src::Imm(0)),
            },
            Some(_) => return self.invalid("cp.async source size must be at most the copy size"),
        };
        if let Some(src_size) = src_size {
            let fill = CpFill {
                dsp,
                dst,
                ssp,
                src,
                size: size as u8,
                src_size,
                ignore,
            };
            return self.emit(i, MemoryOp::CpFill(Box::new(fill)));
        }
        let n = (size / 4) as u8;
        let mut ds = [self.sink; 4];
        for d in ds.iter_mut().take(usize::from(n)) {
            *d = self.new_reg()?;
        }
        self.emit(
            i,
            MemoryOp::Ld {
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
            MemoryOp::St {
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
            MemoryOp::Atom {
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
}
