//! Decoders for `wmma` (`Family::Memory`): `wmma.load`, `wmma.store` and `wmma.mma` of f16
//! fragments in the shapes `ir::matrix::WmmaShape` names, with f16 or f32 accumulators (what
//! `nvcuda::wmma` with `half` compiles to). Other types and shapes, and `.satfinite`, are
//! `Error::Unsupported` with the line named.

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast;
use crate::ir::matrix::{Elem, Part, WmmaAccess, WmmaMma, WmmaShape, wmma_regs};
use crate::ir::{MemoryOp, Space, Src, Ty};

/// A fragment's element type from the instruction's type.
fn elem(t: Option<Ty>) -> Option<Elem> {
    match t {
        Some(Ty::F16) => Some(Elem::F16),
        Some(Ty::F32) => Some(Elem::F32),
        _ => None,
    }
}

impl Ctx<'_> {
    /// `wmma.load`, `wmma.store` or `wmma.mma`.
    pub(super) fn wmma(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let Some(shape) = i.mods.iter().find_map(|x| WmmaShape::parse(x)) else {
            return self.unsup("wmma shapes other than m16n16k16, m32n8k16 and m8n32k16 of f16");
        };
        let layouts: Vec<bool> = i
            .mods
            .iter()
            .filter(|x| *x == "row" || *x == "col")
            .map(|x| x == "row")
            .collect();
        if m.has("mma") {
            return self.wmma_mma(i, m, shape, layouts.len());
        }
        let store = m.has("store");
        if !(store || m.has("load")) || layouts.len() != 1 {
            return self.invalid("wmma takes .load, .store or .mma, and one layout (.row/.col)");
        }
        let part = match () {
            _ if store && m.has("d") => Part::C,
            _ if !store && m.has("a") => Part::A,
            _ if !store && m.has("b") => Part::B,
            _ if !store && m.has("c") => Part::C,
            _ => return self.invalid("wmma.load takes .a, .b or .c; wmma.store takes .d"),
        };
        let ty = match elem(m.last_ty()) {
            Some(Elem::F32) if part != Part::C => None,
            t => t,
        };
        let Some(ty) = ty else {
            return self.unsup("wmma fragments other than f16 (and f32 accumulators)");
        };
        let ops = &i.operands;
        if !(2..=3).contains(&ops.len()) {
            return self.invalid("wmma.load/store takes a fragment, an [address] and a stride");
        }
        let (frag, at) = if store {
            (&ops[1], &ops[0])
        } else {
            (&ops[0], &ops[1])
        };
        let parts = self.reg_vector(frag, wmma_regs(part, ty), "this wmma fragment")?;
        let space = m.space().unwrap_or(Space::Generic);
        if !matches!(space, Space::Generic | Space::Global | Space::Shared) {
            return self.invalid("wmma reads and writes global or shared memory");
        }
        let (space, addr) = self.addr(at, space)?;
        let stride = match ops.get(2) {
            Some(o) => Some(self.src(o, Ty::U32)?),
            None => None,
        };
        let mut acc = WmmaAccess {
            part,
            shape,
            ty,
            row_major: layouts[0],
            space,
            addr,
            stride,
            d: [self.sink; 8],
            s: [Src::Imm(0); 8],
        };
        for (k, o) in parts.iter().enumerate() {
            if store {
                acc.s[k] = self.src(o, Ty::B32)?;
            } else {
                acc.d[k] = self.dst(o)?;
            }
        }
        let op = if store {
            MemoryOp::WmmaStore(Box::new(acc))
        } else {
            MemoryOp::WmmaLoad(Box::new(acc))
        };
        self.emit(i, op)
    }

    /// `wmma.mma.sync.aligned.alayout.blayout.shape.dtype.ctype d, a, b, c`.
    fn wmma_mma(&mut self, i: &ast::Inst, m: &Mods, shape: WmmaShape, layouts: usize) -> R<()> {
        if layouts != 2 || m.has("satfinite") {
            return self.unsup("wmma.mma other than .alayout.blayout without .satfinite");
        }
        let tys: Vec<Option<Elem>> = i
            .mods
            .iter()
            .filter_map(|x| Ty::parse(x))
            .map(|t| elem(Some(t)))
            .collect();
        let [Some(d_ty), Some(c_ty)] = tys[..] else {
            return self.unsup("wmma.mma with types other than .f16/.f32 accumulators");
        };
        self.need(i, 4)?;
        let ops = &i.operands;
        let mut op = WmmaMma {
            shape,
            d_ty,
            c_ty,
            d: [self.sink; 8],
            a: [Src::Imm(0); 8],
            b: [Src::Imm(0); 8],
            c: [Src::Imm(0); 8],
        };
        let d = self.reg_vector(&ops[0], wmma_regs(Part::C, d_ty), "this wmma fragment")?;
        for (slot, o) in op.d.iter_mut().zip(d) {
            *slot = self.dst(o)?;
        }
        for (k, n, slots) in [
            (1, wmma_regs(Part::A, Elem::F16), &mut op.a),
            (2, wmma_regs(Part::B, Elem::F16), &mut op.b),
            (3, wmma_regs(Part::C, c_ty), &mut op.c),
        ] {
            let parts = self.reg_vector(&ops[k], n, "this wmma fragment")?;
            for (slot, o) in slots.iter_mut().zip(parts) {
                *slot = self.src(o, Ty::B32)?;
            }
        }
        self.emit(i, MemoryOp::WmmaMma(Box::new(op)))
    }
}
