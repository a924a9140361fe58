//! Decoders for `wmma` (`Family::Memory`): `wmma.load`, `wmma.store` and `wmma.mma` in the
//! shapes and types `ir::matrix::WmmaShape::regs` names: f16 (f16 or f32 accumulators), bf16
//! (f32), s8 and u8 (s32, `.satfinite` or wrapping), tf32 (`m16n16k8`, f32) and f64
//! (`m8n8k4`). Sub-byte types (`.s4`, `.u4`, `.b1`) and f64's directed roundings are
//! `Error::Unsupported` with the line named.

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast;
use crate::ir::matrix::{Elem, Part, WmmaAccess, WmmaMma, WmmaShape};
use crate::ir::{MemoryOp, Space, Src, Ty};

/// The element types among an instruction's modifiers, in order.
fn elems(i: &ast::Inst) -> Vec<Elem> {
    i.mods.iter().filter_map(|x| Elem::parse(x)).collect()
}

impl Ctx<'_> {
    /// `wmma.load`, `wmma.store` or `wmma.mma`.
    pub(super) fn wmma(&mut self, i: &ast::Inst, m: &Mods) -> R<()> {
        let Some(shape) = i.mods.iter().find_map(|x| WmmaShape::parse(x)) else {
            return self.unsup(
                "wmma shapes other than m16n16k16, m32n8k16, m8n32k16, m16n16k8 and m8n8k4",
            );
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
        let fragment = elems(i)
            .last()
            .and_then(|&t| Some((t, shape.regs(part, t)?)));
        let Some((ty, regs)) = fragment else {
            return self.unsup(
                "this wmma fragment type: A and B take f16, bf16, s8 or u8 (tf32 in m16n16k8, \
                 f64 in m8n8k4), C and D f16, f32 or s32 (f32 in m16n16k8, f64 in m8n8k4)",
            );
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
        let parts = self.reg_vector(frag, regs, "this wmma fragment")?;
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
                acc.s[k] = self.src(o, if ty == Elem::F64 { Ty::B64 } else { Ty::B32 })?;
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

    /// `wmma.mma.sync.aligned.alayout.blayout.shape{.rnd}.dtype{.atype.btype}.ctype d, a, b, c`
    /// (`{.satfinite}` for integers).
    fn wmma_mma(&mut self, i: &ast::Inst, m: &Mods, shape: WmmaShape, layouts: usize) -> R<()> {
        if layouts != 2 {
            return self.invalid("wmma.mma takes two layouts (.alayout.blayout)");
        }
        if ["rz", "rm", "rp"].iter().any(|r| m.has(r)) {
            return self.unsup("wmma.mma with a rounding other than .rn");
        }
        let (d_ty, a_ty, b_ty, c_ty) = match elems(i)[..] {
            [d, c] => (d, Elem::F16, Elem::F16, c),
            [d, a, b, c] => (d, a, b, c),
            _ => return self.invalid("wmma.mma takes .dtype.ctype, or .dtype.atype.btype.ctype"),
        };
        let ints = [a_ty, b_ty, c_ty, d_ty].map(Elem::is_int);
        let consistent = (ints == [true; 4] || ints == [false; 4])
            && (a_ty == b_ty || ints[0])
            && (!m.has("satfinite") || ints[0]);
        let regs = [
            shape.regs(Part::C, d_ty),
            shape.regs(Part::A, a_ty),
            shape.regs(Part::B, b_ty),
            shape.regs(Part::C, c_ty),
        ];
        let [Some(nd), Some(na), Some(nb), Some(nc)] = regs else {
            return self.unsup("these wmma.mma types in this shape");
        };
        if !consistent {
            return self.unsup("these wmma.mma types together (or .satfinite on floats)");
        }
        self.need(i, 4)?;
        let ops = &i.operands;
        let mut op = WmmaMma {
            shape,
            d_ty,
            a_ty,
            b_ty,
            c_ty,
            satfinite: m.has("satfinite"),
            d: [self.sink; 8],
            a: [Src::Imm(0); 8],
            b: [Src::Imm(0); 8],
            c: [Src::Imm(0); 8],
        };
        let reg_ty = |t: Elem| if t == Elem::F64 { Ty::B64 } else { Ty::B32 };
        let d = self.reg_vector(&ops[0], nd, "this wmma fragment")?;
        for (slot, o) in op.d.iter_mut().zip(d) {
            *slot = self.dst(o)?;
        }
        for (k, n, ty, slots) in [
            (1, na, a_ty, &mut op.a),
            (2, nb, b_ty, &mut op.b),
            (3, nc, c_ty, &mut op.c),
        ] {
            let parts = self.reg_vector(&ops[k], n, "this wmma fragment")?;
            for (slot, o) in slots.iter_mut().zip(parts) {
                *slot = self.src(o, reg_ty(ty))?;
            }
        }
        self.emit(i, MemoryOp::WmmaMma(Box::new(op)))
    }
}
