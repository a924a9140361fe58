//! The PTX syntax tree the parser builds: directives, declarations, statements and instructions
//! as written, each with its source position. Names are still strings; `lower` resolves them.
//! Names and words borrow the source text ([`Str`]): parsing then allocates nothing per name,
//! and only what a later pass makes (the sandbox's registers and parameters) is owned.

use crate::isa::Opcode;
use crate::small::{Item, Small};
pub(crate) use crate::word::Str;

/// A parsed PTX module.
#[derive(Debug, Default)]
pub(crate) struct Module<'a> {
    /// `.version` as written (`8.5`), if present.
    pub version: Option<String>,
    /// `.target` words (`sm_90`, `debug`…).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent).
    pub address_size: Option<u32>,
    /// Module-scope variables (`.global`, `.const`, `.shared`).
    pub vars: Vec<VarDecl<'a>>,
    /// Kernels and device functions, including body-less prototypes.
    pub funcs: Vec<Func<'a>>,
}

/// A state space a variable can be declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    Global,
    Const,
    Shared,
    Local,
    Param,
}

/// A variable declaration (`.shared .align 4 .b8 buf[128];`).
#[derive(Debug, Clone)]
pub(crate) struct VarDecl<'a> {
    pub space: Space,
    pub name: Str<'a>,
    /// Scalar type name without the dot (`b8`, `f32`, `u64`…).
    pub ty: Str<'a>,
    /// Vector width from `.v2`/`.v4` (1 when scalar).
    pub vec: u32,
    pub align: Option<u32>,
    /// Array element count (product of all dimensions); `None` for scalars, `Some(0)` for `[]`.
    pub count: Option<u64>,
    pub init: Vec<Init>,
    pub is_extern: bool,
    /// `.visible`/`.weak`/`.common` as written (module scope only).
    pub linkage: Option<String>,
    pub line: u32,
}

/// One initialiser element.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Init {
    Int(i128),
    F64Bits(u64),
    F32Bits(u32),
    /// An address-valued element (`tbl`, `generic(tbl)+4`): needs a linker, so it is rejected
    /// by lowering and refused by the sandbox, but it parses.
    Symbol,
}

/// A kernel (`.entry`) or device function (`.func`).
#[derive(Debug)]
pub(crate) struct Func<'a> {
    pub name: Str<'a>,
    pub is_entry: bool,
    pub params: Vec<VarDecl<'a>>,
    pub rets: Vec<VarDecl<'a>>,
    pub max_threads: Option<u32>,
    /// `.visible`/`.weak`/`.extern` as written.
    pub linkage: Option<String>,
    /// Performance directives in order (`maxntid` → `[256, 1, 1]`, `noreturn` → `[]`).
    pub attrs: Vec<(String, Vec<u64>)>,
    /// `None` for a prototype (`.extern .func f(...);`).
    pub body: Option<Vec<Stmt<'a>>>,
    /// Where known, the statements of `body` (indices into it, ascending) that own heap memory:
    /// the parser notes them, and a pass that changes a body forgets them (`None`).
    /// `Module::drop_lean` then drops only those (see drop.rs).
    pub heap_stmts: Option<Vec<u32>>,
    pub line: u32,
}

/// A statement inside a function body.
// Most statements are instructions, which keep their modifiers and operands inline: boxing
// them would bring back an allocation per instruction, which that layout is there to avoid.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Stmt<'a> {
    /// `.reg .type names;` — each name with its `<n>` range count if any.
    Reg {
        ty: Str<'a>,
        names: Vec<(Str<'a>, Option<u32>)>,
        line: u32,
    },
    Var(VarDecl<'a>),
    Label(Str<'a>, u32),
    /// `name: .branchtargets L1, L2, …;` — a jump table for `brx.idx`.
    Targets(Str<'a>, Vec<Str<'a>>, u32),
    Inst(Inst<'a>),
    Block(Vec<Stmt<'a>>),
}

/// One instruction as written.
#[derive(Debug, Clone)]
pub(crate) struct Inst<'a> {
    /// `(predicate register, negated)`.
    pub guard: Option<(Str<'a>, bool)>,
    pub opcode: Str<'a>,
    /// `opcode` as an ISA opcode (`None`: not PTX), looked up once: the sandbox asks for it
    /// several times an instruction, and the lookup compares names one by one.
    pub op: Option<Opcode>,
    /// Modifiers in order, without dots. Three kept inline: 97% of the nvcc corpus's
    /// instructions have at most three, and most with more have six or more (already past
    /// four), while a fourth slot was 16 bytes more of every statement.
    pub mods: Small<Str<'a>, 3>,
    /// Operands in order (a few: kept inline).
    pub operands: Small<Operand<'a>, 4>,
    pub line: u32,
}

/// An operand as written.
// A plain tag byte (`repr(u8)`), not one hidden in a name's spare bits: the 32-byte niche-packed
// form cost more to tell variants apart (every match, every drop) than its size saved.
#[derive(Debug, Clone, PartialEq, Default)]
#[repr(u8)]
pub(crate) enum Operand<'a> {
    /// Register, special register (`%tid.x`), label or variable name.
    Name(Str<'a>),
    /// `!%p`
    Not(Str<'a>),
    /// `%p|%q` (setp's two destinations). Boxed, as is `Image`: both are rare, and inline they
    /// would make every operand 48 bytes rather than 32, so every instruction 304 bytes.
    Pair(Box<(Str<'a>, Str<'a>)>),
    Int(i64),
    F32Bits(u32),
    F64Bits(u64),
    /// `[base+offset]`; base `None` means an absolute address.
    Addr(Option<Str<'a>>, i64),
    /// `{a, b, …}`
    Vec(Vec<Operand<'a>>),
    /// `(a, b, …)` in call argument lists.
    List(Vec<Operand<'a>>),
    /// `_` sink (also what an unused inline slot of an operand list holds).
    #[default]
    Sink,
    /// A texture/surface operand `[handle, {x, y}]`: the handle's name and the coordinates.
    Image(Box<(Str<'a>, Vec<Operand<'a>>)>),
}

// SAFETY: a name that is not owned (a borrowed one, or `Str::default()`, an unused slot's
// value) holds no allocation, and its bitwise copy is another such name.
unsafe impl Item for Str<'_> {
    fn owns_nothing(&self) -> bool {
        !self.is_owned()
    }
}

// SAFETY: `owns_nothing` is true only of numbers, the sink, and names (bare or in an address)
// that own nothing themselves (see `Str`'s).
unsafe impl Item for Operand<'_> {
    fn owns_nothing(&self) -> bool {
        match self {
            Operand::Name(n) | Operand::Not(n) | Operand::Addr(Some(n), _) => n.owns_nothing(),
            Operand::Int(_)
            | Operand::F32Bits(_)
            | Operand::F64Bits(_)
            | Operand::Addr(None, _)
            | Operand::Sink => true,
            Operand::Pair(_) | Operand::Vec(_) | Operand::List(_) | Operand::Image(_) => false,
        }
    }
}

/// A copy of a name that no longer borrows the source text.
fn own(s: Str<'_>) -> Str<'static> {
    Str::owned(s.into_owned())
}

impl Module<'_> {
    /// The module with every name owned, for a holder that outlives the source text (the
    /// linker keeps the modules it is given).
    pub(crate) fn into_owned(self) -> Module<'static> {
        Module {
            version: self.version,
            target: self.target,
            address_size: self.address_size,
            vars: self.vars.into_iter().map(VarDecl::into_owned).collect(),
            funcs: self.funcs.into_iter().map(Func::into_owned).collect(),
        }
    }
}

impl VarDecl<'_> {
    fn into_owned(self) -> VarDecl<'static> {
        VarDecl {
            name: own(self.name),
            ty: own(self.ty),
            space: self.space,
            vec: self.vec,
            align: self.align,
            count: self.count,
            init: self.init,
            is_extern: self.is_extern,
            linkage: self.linkage,
            line: self.line,
        }
    }
}

impl Func<'_> {
    fn into_owned(self) -> Func<'static> {
        let decls = |v: Vec<VarDecl<'_>>| v.into_iter().map(VarDecl::into_owned).collect();
        Func {
            name: own(self.name),
            is_entry: self.is_entry,
            params: decls(self.params),
            rets: decls(self.rets),
            max_threads: self.max_threads,
            linkage: self.linkage,
            attrs: self.attrs,
            body: self.body.map(stmts_owned),
            heap_stmts: None,
            line: self.line,
        }
    }
}

fn stmts_owned(body: Vec<Stmt<'_>>) -> Vec<Stmt<'static>> {
    body.into_iter()
        .map(|s| match s {
            Stmt::Reg { ty, names, line } => Stmt::Reg {
                ty: own(ty),
                names: names.into_iter().map(|(n, r)| (own(n), r)).collect(),
                line,
            },
            Stmt::Var(v) => Stmt::Var(v.into_owned()),
            Stmt::Label(l, line) => Stmt::Label(own(l), line),
            Stmt::Targets(n, ls, line) => {
                Stmt::Targets(own(n), ls.into_iter().map(own).collect(), line)
            }
            Stmt::Inst(i) => Stmt::Inst(Inst {
                guard: i.guard.map(|(g, neg)| (own(g), neg)),
                opcode: own(i.opcode),
                op: i.op,
                mods: i.mods.into_vec().into_iter().map(own).collect(),
                operands: operands_owned(i.operands.into_vec()).into(),
                line: i.line,
            }),
            Stmt::Block(b) => Stmt::Block(stmts_owned(b)),
        })
        .collect()
}

fn operands_owned(ops: Vec<Operand<'_>>) -> Vec<Operand<'static>> {
    ops.into_iter()
        .map(|o| match o {
            Operand::Name(n) => Operand::Name(own(n)),
            Operand::Not(n) => Operand::Not(own(n)),
            Operand::Pair(p) => {
                let (a, b) = *p;
                Operand::Pair(Box::new((own(a), own(b))))
            }
            Operand::Int(v) => Operand::Int(v),
            Operand::F32Bits(b) => Operand::F32Bits(b),
            Operand::F64Bits(b) => Operand::F64Bits(b),
            Operand::Addr(b, off) => Operand::Addr(b.map(own), off),
            Operand::Vec(v) => Operand::Vec(operands_owned(v)),
            Operand::List(v) => Operand::List(operands_owned(v)),
            Operand::Sink => Operand::Sink,
            Operand::Image(p) => {
                let (h, c) = *p;
                Operand::Image(Box::new((own(h), operands_owned(c))))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Inst, Operand, Stmt};

    /// Pins the tree's sizes as upper bounds: statements are moved, cloned and dropped by the
    /// thousand per module (issue #9), so growing them is a cost to notice, not an accident.
    #[test]
    fn node_sizes_stay_small() {
        assert!(std::mem::size_of::<Operand>() <= 32);
        assert!(std::mem::size_of::<Inst>() <= 240);
        assert!(std::mem::size_of::<Stmt>() <= 240);
    }
}
