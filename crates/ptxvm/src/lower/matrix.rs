//! Decoders for the warp-level matrix instructions: `mma.sync.aligned` in the shapes and types
//! `ir::matrix` lays out, and `movmatrix` (`Family::Collective`); `ldmatrix` and `stmatrix`
//! (`Family::Memory`). Every other shape, type or layout is `Error::Unsupported` with the
//! instruction's line, never a guess.

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::ir::matrix::{Elem, MatrixAccess, MmaOp, Part, Shape, regs};
use crate::ir::{CollectiveOp, MemoryOp, Space, Src, Ty};
use crate::isa::Opcode;

/// Whether A and B of type `ab` with C and D of types `c`, `d` is an `mma` form of `shape`
/// (PTX ISA 9.7.14.5.14, the forms of sm_80 and later; f64 beyond `.m8n8k4` is sm_90's).
fn is_form(shape: Shape, ab: Elem, c: Elem, d: Elem) -> bool {
    use Elem::*;
    let half_acc = |x: Elem| matches!(x, F16 | F32);
    match shape {
        Shape::M16n8k16 | Shape::M16n8k8 if ab == F16 => half_acc(c) && half_acc(d),
        Shape::M16n8k16 | Shape::M16n8k8 if ab == Bf16 => c == F32 && d == F32,
        Shape::M16n8k8 | Shape::M16n8k4 if ab == Tf32 => c == F32 && d == F32,
        Shape::M8n8k4 => ab == F64 && c == F64 && d == F64,
        Shape::M16n8k32 | Shape::M16n8k16 | Shape::M8n8k16 => {
            matches!(ab, S8 | U8) && c == S32 && d == S32
        }
        _ => false,
    }
}

impl Ctx<'_> {
    /// `mma.sync.aligned.SHAPE.row.col{.satfinite}.D.A.B.C d, a, b, c`.
    pub(super) fn mma(&mut self, i: &ast::Inst) -> R<()> {
        let (mut shape, mut layouts, mut tys, mut satfinite) =
            (None, Vec::new(), Vec::new(), false);
        for m in &i.mods {
            let m = m.as_ref();
            if let Some(s) = Shape::parse(m) {
                shape = Some(s);
            } else if let Some(t) = Elem::parse(m) {
                tys.push(t);
            } else if matches!(m, "row" | "col") {
                layouts.push(m);
            } else if m == "satfinite" {
                satfinite = true;
            }
        }
        let Some(shape) = shape else {
            return self.invalid("mma needs a shape (.m16n8k16, .m16n8k8, ...)");
        };
        let [d_ty, a_ty, b_ty, c_ty] = tys[..] else {
            return self.invalid("mma takes four types: .dtype.atype.btype.ctype");
        };
        if layouts != ["row", "col"] {
            return self.unsup("mma layouts other than .row.col (A row-major, B column-major)");
        }
        // Mixed s8/u8 is a form; A and B of two float types is not.
        let ab = if a_ty.is_int() && b_ty.is_int() {
            Elem::S8
        } else {
            a_ty
        };
        if (a_ty != b_ty && !a_ty.is_int()) || !is_form(shape, ab, c_ty, d_ty) {
            return self.unsup(format!(
                "mma.{} with .{d_ty:?}.{a_ty:?}.{b_ty:?}.{c_ty:?} (ptxvm runs f16, bf16, tf32, \
                 f64 and s8/u8 forms)",
                i.mods
                    .iter()
                    .find(|m| Shape::parse(m).is_some())
                    .map_or("", |m| m.as_ref())
            ));
        }
        if satfinite && !d_ty.is_int() {
            return self.invalid("mma .satfinite applies to integer forms only");
        }
        self.need(i, 4)?;
        let ops = &i.operands;
        let mut op = MmaOp {
            shape,
            d_ty,
            a_ty,
            b_ty,
            c_ty,
            satfinite,
            d: [self.sink; 4],
            a: [Src::Imm(0); 4],
            b: [Src::Imm(0); 2],
            c: [Src::Imm(0); 4],
        };
        let d = self.fragment(&ops[0], shape, Part::C, d_ty, "D")?;
        for (slot, o) in op.d.iter_mut().zip(d) {
            *slot = self.dst(o)?;
        }
        for (part, ty, name, slots) in [
            (Part::A, a_ty, "A", &mut op.a[..]),
            (Part::B, b_ty, "B", &mut op.b[..]),
            (Part::C, c_ty, "C", &mut op.c[..]),
        ] {
            let parts = self.fragment(&ops[part_index(part)], shape, part, ty, name)?;
            let rty = if ty.bits() == 64 { Ty::B64 } else { Ty::B32 };
            for (slot, o) in slots.iter_mut().zip(parts) {
                *slot = self.src(o, rty)?;
            }
        }
        self.emit(i, CollectiveOp::Mma(Box::new(op)))
    }

    /// The registers of one `mma` operand, checked against the count its shape and type take.
    fn fragment<'o, 'a>(
        &self,
        o: &'o Operand<'a>,
        shape: Shape,
        part: Part,
        ty: Elem,
        name: &str,
    ) -> R<&'o [Operand<'a>]> {
        let what = format!("mma's {name} of this shape and type");
        self.reg_vector(o, regs(shape, part, ty), &what)
    }

    /// The registers of a matrix instruction's operand, `{r0, r1, …}` (or one register alone),
    /// which must be `want` of them; `what` names the operand in the error.
    pub(super) fn reg_vector<'o, 'a>(
        &self,
        o: &'o Operand<'a>,
        want: usize,
        what: &str,
    ) -> R<&'o [Operand<'a>]> {
        let parts = match o {
            Operand::Vec(v) => v.as_slice(),
            Operand::Name(_) => std::slice::from_ref(o),
            _ => return self.invalid(format!("{what} must be a register vector {{…}}")),
        };
        if parts.len() != want {
            return self.invalid(format!(
                "{what} takes {want} registers, found {}",
                parts.len()
            ));
        }
        Ok(parts)
    }

    /// `movmatrix.sync.aligned.m8n8.trans.b16 d, a`.
    pub(super) fn movmatrix(&mut self, i: &ast::Inst) -> R<()> {
        let has = |f: &str| i.mods.iter().any(|m| m == f);
        if !(has("m8n8") && has("trans") && has("b16")) {
            return self.unsup("movmatrix other than .sync.aligned.m8n8.trans.b16");
        }
        self.need(i, 2)?;
        let d = self.dst(&i.operands[0])?;
        let a = self.src(&i.operands[1], Ty::B32)?;
        self.emit(i, CollectiveOp::Movmatrix { d, a })
    }
}

impl Ctx<'_> {
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}{.shared{::cta}}.b16 d, [a]` and
    /// `stmatrix.sync.aligned.m8n8.xN{.trans}{.shared{::cta}}.b16 [a], s`.
    pub(super) fn matrix_access(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        let n: u8 = if m.has("x4") {
            4
        } else if m.has("x2") {
            2
        } else if m.has("x1") {
            1
        } else {
            return self.invalid(format!("{op} needs .x1, .x2 or .x4"));
        };
        if !m.has("m8n8") || m.last_ty() != Some(Ty::B16) {
            return self.unsup(format!("{op} other than .m8n8 of .b16"));
        }
        let space = match m.space() {
            None => Space::Generic,
            Some(Space::Shared) => Space::Shared,
            Some(_) => return self.invalid(format!("{op} reads and writes shared memory")),
        };
        self.need(i, 2)?;
        let load = op == Opcode::Ldmatrix;
        let (regs_op, addr_op) = if load {
            (&i.operands[0], &i.operands[1])
        } else {
            (&i.operands[1], &i.operands[0])
        };
        let parts = self.reg_vector(regs_op, usize::from(n), &format!("{op}.x{n}"))?;
        let (space, addr) = self.addr(addr_op, space)?;
        let mut acc = MatrixAccess {
            space,
            addr,
            n,
            trans: m.has("trans"),
            d: [self.sink; 4],
            s: [Src::Imm(0); 4],
        };
        if load {
            (acc.d, _) = self.dst_vec(parts)?;
            self.emit(i, MemoryOp::Ldmatrix(Box::new(acc)))
        } else {
            (acc.s, _) = self.src_vec(parts, Ty::B32)?;
            self.emit(i, MemoryOp::Stmatrix(Box::new(acc)))
        }
    }
}

/// Operand position of `part` in `d, a, b, c` (D is position 0, C's layout's other user).
fn part_index(part: Part) -> usize {
    match part {
        Part::A => 1,
        Part::B => 2,
        Part::C => 3,
    }
}
