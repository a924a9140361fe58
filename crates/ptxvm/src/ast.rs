//! The PTX syntax tree the parser builds: directives, declarations, statements and instructions
//! as written, each with its source position. Names are still strings; `lower` resolves them.

/// A parsed PTX module.
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// `.version` as written (`8.5`), if present.
    pub version: Option<String>,
    /// `.target` words (`sm_90`, `debug`…).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent).
    pub address_size: Option<u32>,
    /// Module-scope variables (`.global`, `.const`, `.shared`).
    pub vars: Vec<VarDecl>,
    /// Kernels and device functions, including body-less prototypes.
    pub funcs: Vec<Func>,
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
pub(crate) struct VarDecl {
    pub space: Space,
    pub name: String,
    /// Scalar type name without the dot (`b8`, `f32`, `u64`…).
    pub ty: String,
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
pub(crate) struct Func {
    pub name: String,
    pub is_entry: bool,
    pub params: Vec<VarDecl>,
    pub rets: Vec<VarDecl>,
    pub max_threads: Option<u32>,
    /// `.visible`/`.weak`/`.extern` as written.
    pub linkage: Option<String>,
    /// Performance directives in order (`maxntid` → `[256, 1, 1]`, `noreturn` → `[]`).
    pub attrs: Vec<(String, Vec<u64>)>,
    /// `None` for a prototype (`.extern .func f(...);`).
    pub body: Option<Vec<Stmt>>,
    pub line: u32,
}

/// A statement inside a function body.
#[derive(Debug)]
pub(crate) enum Stmt {
    /// `.reg .type names;` — each name with its `<n>` range count if any.
    Reg {
        ty: String,
        names: Vec<(String, Option<u32>)>,
        line: u32,
    },
    Var(VarDecl),
    Label(String, u32),
    /// `name: .branchtargets L1, L2, …;` — a jump table for `brx.idx`.
    Targets(String, Vec<String>, u32),
    Inst(Inst),
    Block(Vec<Stmt>),
}

/// One instruction as written.
#[derive(Debug, Clone)]
pub(crate) struct Inst {
    /// `(predicate register, negated)`.
    pub guard: Option<(String, bool)>,
    pub opcode: String,
    /// Modifiers in order, without dots.
    pub mods: Vec<String>,
    pub operands: Vec<Operand>,
    pub line: u32,
}

/// An operand as written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    /// Register, special register (`%tid.x`), label or variable name.
    Name(String),
    /// `!%p`
    Not(String),
    /// `%p|%q` (setp's two destinations).
    Pair(String, String),
    Int(i64),
    F32Bits(u32),
    F64Bits(u64),
    /// `[base+offset]`; base `None` means an absolute address.
    Addr(Option<String>, i64),
    /// `{a, b, …}`
    Vec(Vec<Operand>),
    /// `(a, b, …)` in call argument lists.
    List(Vec<Operand>),
    /// `_` sink.
    Sink,
    /// A texture/surface operand `[handle, {x, y}]`: the handle's name and the coordinates.
    Image(String, Vec<Operand>),
}
