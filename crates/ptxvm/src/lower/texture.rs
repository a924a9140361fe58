//! Decoders for the texture family (`isa::Family::Texture`): `tex` (sampled reads through a
//! texture object), `tld4` (2D gathers), `suld`/`sust` (surface loads and stores by byte
//! coordinate) and the size queries `txq`/`suq`. Only unified mode is taken: the handle is a `.b64` register holding a
//! `CUtexObject` / `CUsurfObject`; module-scope `.texref`/`.surfref` variables are unsupported.

use super::mods::Mods;
use super::{Ctx, R};
use crate::ast::{self, Operand};
use crate::image::Read;
use crate::ir::{Geom, ImageQuery, Oob, Reg, Src, TextureOp, Ty};
use crate::isa::Opcode;

impl Ctx<'_> {
    /// Decodes a texture or surface instruction (`Family::Texture`).
    pub(super) fn texture(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        match op {
            Opcode::Tex | Opcode::Tld4 => self.tex(i, op, m),
            Opcode::Txq | Opcode::Suq => self.image_query(i, op, m),
            Opcode::Suld | Opcode::Sust => self.surface_access(i, op, m),
            _ => self.invalid(format!(
                "{op} is not a texture instruction (the instruction table and the lowering disagree)"
            )),
        }
    }

    /// The geometry modifier (one is required).
    fn geom(&self, m: &Mods) -> R<Geom> {
        let g = m.flags.iter().find_map(|f| match *f {
            "1d" => Some(Geom::D1),
            "2d" => Some(Geom::D2),
            "3d" => Some(Geom::D3),
            "a1d" => Some(Geom::A1),
            "a2d" => Some(Geom::A2),
            _ => None,
        });
        match g {
            Some(g) => Ok(g),
            None => self.unsup("texture geometry other than .1d/.2d/.3d/.a1d/.a2d"),
        }
    }

    /// The handle register of `[h, ...]` or `[h]`.
    fn handle(&mut self, name: &str) -> R<Reg> {
        if !name.starts_with('%') {
            return self.unsup(format!(
                "texture/surface reference {name} (only object handles in registers: unified mode)"
            ));
        }
        Ok(self.reg(name)?.0)
    }

    /// The handle and `[x, y, z]` of `[h, {coords}]` for `geom`; a layered geometry's first
    /// coordinate (the layer, always `.u32`) becomes z. Coordinate vectors have 1, 2 or 4
    /// elements (the 4th of a 3D or `.a2d` vector is ignored), as PTX writes them.
    fn image_operand(&mut self, o: &Operand, geom: Geom, cty: Ty) -> R<(Reg, [Src; 3])> {
        let Operand::Image(p) = o else {
            return self.invalid("expected a [handle, {coordinates}] operand");
        };
        let (h, coords) = &**p;
        let handle = self.handle(h)?;
        let (layer, rest) = match geom {
            Geom::A1 | Geom::A2 => match coords.split_first() {
                Some((l, rest)) => (Some(self.src(l, Ty::U32)?), rest),
                None => return self.invalid("a layered access needs a layer index"),
            },
            _ => (None, &coords[..]),
        };
        let dims = match geom {
            Geom::D1 | Geom::A1 => 1,
            Geom::D2 | Geom::A2 => 2,
            Geom::D3 => 3,
        };
        let written = match (geom, rest.len()) {
            (Geom::D3, 4) | (Geom::A2, 3) => rest.len() - 1,
            (_, n) => n,
        };
        if written != dims {
            return self.invalid(format!(
                "{geom:?} takes {dims} coordinate(s), found {}",
                rest.len()
            ));
        }
        let mut out = [Src::Imm(0); 3];
        for (k, c) in rest.iter().take(dims).enumerate() {
            out[k] = self.src(c, cty)?;
        }
        if let Some(l) = layer {
            out[2] = l;
        }
        Ok((handle, out))
    }

    /// `tex.geom.v4.dtype.ctype d, [h, {c}]` and `tld4.comp.2d.v4.dtype.f32 d, [h, {x, y}]`.
    fn tex(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        self.need(i, 2)?;
        let geom = self.geom(m)?;
        let Some((dty, cty)) = m.two_tys() else {
            return self.invalid(format!("{op} takes a destination and a coordinate type"));
        };
        if !matches!(dty, Ty::F32 | Ty::S32 | Ty::U32) || !matches!(cty, Ty::F32 | Ty::S32) {
            return self.unsup(format!(
                "{op}.{dty:?}.{cty:?} (only .f32/.s32/.u32 from .f32/.s32)"
            ));
        }
        let comp = ["r", "g", "b", "a"].iter().position(|c| m.has(c));
        let read = match (op, comp) {
            (Opcode::Tex, None) => Read::Sample {
                int_coords: cty == Ty::S32,
            },
            (Opcode::Tld4, Some(c)) if geom == Geom::D2 && cty == Ty::F32 => {
                Read::Gather { comp: c as u8 }
            }
            (Opcode::Tld4, Some(_)) => return self.unsup("tld4 other than .2d from .f32"),
            _ => return self.invalid(format!("{op}: .r/.g/.b/.a belong to tld4, which needs one")),
        };
        if m.vec() != 4 {
            return self.unsup(format!("{op} without .v4"));
        }
        let ds = match &i.operands[0] {
            Operand::Vec(v) if v.len() == 4 => self.dst_vec(v)?.0,
            Operand::Pair(..) => return self.unsup(format!("{op} with a residency predicate")),
            _ => return self.invalid(format!("{op}.v4 writes a vector of 4 registers")),
        };
        let (handle, coords) = self.image_operand(&i.operands[1], geom, cty)?;
        self.emit(
            i,
            TextureOp::Tex {
                geom,
                read,
                ds,
                handle,
                coords,
            },
        )
    }

    /// `txq.q.b32 d, [h]` / `suq.q.b32 d, [h]`.
    fn image_query(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        self.need(i, 2)?;
        let q = if m.has("width") {
            ImageQuery::Width
        } else if m.has("height") {
            ImageQuery::Height
        } else if m.has("depth") {
            ImageQuery::Depth
        } else {
            return self.unsup(format!("{op} query other than .width/.height/.depth"));
        };
        let d = self.dst(&i.operands[0])?;
        let handle = match &i.operands[1] {
            Operand::Addr(Some(h), 0) => self.handle(h)?,
            _ => return self.invalid(format!("{op} takes [handle]")),
        };
        self.emit(
            i,
            TextureOp::Query {
                surface: op == Opcode::Suq,
                q,
                d,
                handle,
            },
        )
    }

    /// `suld.b.geom{.vN}.bK.oob d, [h, {x, ...}]` and `sust.b.geom{.vN}.bK.oob [h, {x, ...}], s`.
    fn surface_access(&mut self, i: &ast::Inst, op: Opcode, m: &Mods) -> R<()> {
        self.need(i, 2)?;
        if !m.has("b") {
            return self.unsup(format!("{op}.p (formatted surface access); use {op}.b"));
        }
        let geom = self.geom(m)?;
        let ty = match m.last_ty() {
            Some(t @ (Ty::B8 | Ty::B16 | Ty::B32 | Ty::B64)) => t,
            _ => return self.invalid(format!("{op}.b takes a .b8/.b16/.b32/.b64 type")),
        };
        let oob = if m.has("clamp") {
            Oob::Clamp
        } else if m.has("zero") {
            Oob::Zero
        } else {
            Oob::Trap
        };
        let n = m.vec();
        let bytes = ty.bytes() as u8;
        if op == Opcode::Suld {
            let ds = match &i.operands[0] {
                Operand::Vec(v) => self.dst_vec(v)?,
                o => ([self.dst(o)?, self.sink, self.sink, self.sink], 1),
            };
            if ds.1 != n {
                return self.invalid("vector width does not match operand count");
            }
            let (handle, coords) = self.image_operand(&i.operands[1], geom, Ty::S32)?;
            self.emit(
                i,
                TextureOp::Suld {
                    geom,
                    oob,
                    bytes,
                    n,
                    ds: ds.0,
                    handle,
                    coords,
                },
            )
        } else {
            let srcs = match &i.operands[1] {
                Operand::Vec(v) => self.src_vec(v, ty)?,
                o => ([self.src(o, ty)?, Src::Imm(0), Src::Imm(0), Src::Imm(0)], 1),
            };
            if srcs.1 != n {
                return self.invalid("vector width does not match operand count");
            }
            let (handle, coords) = self.image_operand(&i.operands[0], geom, Ty::S32)?;
            self.emit(
                i,
                TextureOp::Sust {
                    geom,
                    oob,
                    bytes,
                    n,
                    srcs: srcs.0,
                    handle,
                    coords,
                },
            )
        }
    }
}
