//! Instruction modifiers split into types and flags, and read back as the lowering needs them
//! (which flags each opcode accepts is the instruction table's, `isa::Modifiers`).

use crate::ast::Str;
use crate::ir::{Cmp, Rnd, Space, Ty};

/// The double-width type of `mul.wide`/`mad.wide`.
pub(crate) fn wide(t: Ty) -> Ty {
    match t {
        Ty::S16 => Ty::S32,
        Ty::U16 => Ty::U32,
        Ty::S32 => Ty::S64,
        _ => Ty::U64,
    }
}

/// An instruction's modifiers split into types and flags.
pub(super) struct Mods<'a> {
    tys: Vec<Ty>,
    pub(super) flags: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    pub(super) fn new(mods: &'a [Str<'_>]) -> Self {
        let mut tys = Vec::new();
        let mut flags = Vec::new();
        for m in mods {
            match Ty::parse(m) {
                Some(t) => tys.push(t),
                None => flags.push(m.as_ref()),
            }
        }
        Mods { tys, flags }
    }
    pub(super) fn has(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }
    pub(super) fn last_ty(&self) -> Option<Ty> {
        self.tys.last().copied()
    }
    pub(super) fn two_tys(&self) -> Option<(Ty, Ty)> {
        match self.tys.as_slice() {
            [a, b] => Some((*a, *b)),
            _ => None,
        }
    }
    pub(super) fn vec(&self) -> u8 {
        if self.has("v4") {
            4
        } else if self.has("v2") {
            2
        } else {
            1
        }
    }
    pub(super) fn space(&self) -> Option<Space> {
        self.flags.iter().find_map(|f| match *f {
            "global" | "const" => Some(Space::Global),
            "shared" | "shared::cta" => Some(Space::Shared),
            "local" => Some(Space::Local),
            "param" | "param::entry" | "param::func" => Some(Space::Param),
            _ => None,
        })
    }
    pub(super) fn rnd(&self) -> Option<Rnd> {
        self.flags.iter().find_map(|f| match *f {
            "rn" | "rni" => Some(Rnd::Rn),
            "rz" | "rzi" => Some(Rnd::Rz),
            "rm" | "rmi" => Some(Rnd::Rm),
            "rp" | "rpi" => Some(Rnd::Rp),
            _ => None,
        })
    }
    pub(super) fn cmp(&self) -> Option<Cmp> {
        self.flags.iter().find_map(|f| Cmp::parse(f))
    }
}
