//! The decoded program: flat instructions with register indices, resolved branch targets and
//! operand kinds decided once at load. The VM executes this and nothing else.
//!
//! Register values are 64-bit lanes. Writers may leave garbage above their type's width; every
//! reader masks or sign-extends from its own type, so no instruction depends on high bits.
//!
//! This module holds the operand types; `op.rs` the ops, by family; `matrix.rs` the shapes and
//! fragment layouts of the warp-level matrix instructions.

pub(crate) mod matrix;
mod op;
pub(crate) use op::*;

/// Register index into a warp's register file.
pub(crate) type Reg = u32;

/// "No register" (a `_` sink or an absent second destination).
pub(crate) const NO_REG: Reg = u32::MAX;

/// Base of the generic-address window that maps onto the block's shared memory.
pub const SHARED_WINDOW: u64 = 0x0001_0000_0000_0000;
/// Base of the generic-address window that maps onto the thread's local memory.
pub const LOCAL_WINDOW: u64 = 0x0002_0000_0000_0000;
/// Size of each window.
pub const WINDOW_SIZE: u64 = 0x0000_0001_0000_0000;
/// Param-space base of the kernel parameter buffer (addresses taken with `mov %rd, param`).
pub(crate) const KPARAM_BASE: u64 = 0x0003_0000_0000_0000;

/// A source operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Src {
    Reg(Reg),
    Imm(u64),
}

/// Operand type of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    B8,
    B16,
    B32,
    B64,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    F32,
    F64,
    Pred,
}

impl Ty {
    /// Parses a type name without its dot.
    pub(crate) fn parse(s: &str) -> Option<Ty> {
        // By bytes: arms of `&str`s are compared with the name one after another (the sandbox
        // asks this of the modifiers of every memory access), arms of bytes branch on the
        // name's length and bytes once.
        Some(match s.as_bytes() {
            [b'b', b'8'] => Ty::B8,
            [b'b', b'1', b'6'] => Ty::B16,
            [b'b', b'3', b'2'] => Ty::B32,
            [b'b', b'6', b'4'] => Ty::B64,
            [b'u', b'8'] => Ty::U8,
            [b'u', b'1', b'6'] => Ty::U16,
            [b'u', b'3', b'2'] => Ty::U32,
            [b'u', b'6', b'4'] => Ty::U64,
            [b's', b'8'] => Ty::S8,
            [b's', b'1', b'6'] => Ty::S16,
            [b's', b'3', b'2'] => Ty::S32,
            [b's', b'6', b'4'] => Ty::S64,
            [b'f', b'1', b'6'] => Ty::F16,
            [b'f', b'1', b'6', b'x', b'2'] => Ty::F16x2,
            [b'b', b'f', b'1', b'6'] => Ty::Bf16,
            [b'b', b'f', b'1', b'6', b'x', b'2'] => Ty::Bf16x2,
            [b'f', b'3', b'2'] => Ty::F32,
            [b'f', b'6', b'4'] => Ty::F64,
            [b'p', b'r', b'e', b'd'] => Ty::Pred,
            _ => return None,
        })
    }
    /// Width in bits (predicates count as 1 byte when stored).
    pub(crate) fn bits(self) -> u32 {
        match self {
            Ty::B8 | Ty::U8 | Ty::S8 | Ty::Pred => 8,
            Ty::B16 | Ty::U16 | Ty::S16 | Ty::F16 | Ty::Bf16 => 16,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16x2 | Ty::Bf16x2 => 32,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 64,
        }
    }
    pub(crate) fn bytes(self) -> u32 {
        self.bits() / 8
    }
    pub(crate) fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    pub(crate) fn is_float(self) -> bool {
        matches!(
            self,
            Ty::F16 | Ty::F16x2 | Ty::Bf16 | Ty::Bf16x2 | Ty::F32 | Ty::F64
        )
    }
}

/// Masks/sign-extends a raw register value to `ty`'s width, as a 64-bit integer.
#[inline(always)]
pub(crate) fn norm(ty: Ty, v: u64) -> u64 {
    match ty.bits() {
        8 if ty.signed() => v as i8 as i64 as u64,
        16 if ty.signed() => v as i16 as i64 as u64,
        32 if ty.signed() => v as i32 as i64 as u64,
        8 => v & 0xff,
        16 => v & 0xffff,
        32 => v & 0xffff_ffff,
        _ => v,
    }
}

/// IEEE rounding mode from `.rn/.rz/.rm/.rp` (and the `i` integer-rounding forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rnd {
    Rn,
    Rz,
    Rm,
    Rp,
}

/// State space of a memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    Generic,
    Global,
    Shared,
    Local,
    /// Kernel parameter buffer.
    Param,
}

/// `[base + off]`; the base register is read at its declared width (`wide`: 64-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Addr {
    pub base: Option<Reg>,
    pub wide: bool,
    pub off: i64,
}

/// Integer two-operand operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IOp {
    Add,
    AddSat,
    Sub,
    SubSat,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Integer multiply-add forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MadKind {
    Lo,
    Hi,
    Wide,
    /// `mad.hi.sat.s32`
    HiSat,
    /// `mul24.lo`/`mad24.lo`: low 32 bits of the 24×24-bit product.
    Lo24,
    /// `mul24.hi`/`mad24.hi`: bits 47..16 of the 24×24-bit product.
    Hi24,
    /// `sad`: `c + |a - b|`.
    Sad,
}

/// Extended-precision operation kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CarryKind {
    Add,
    Sub,
    MadLo,
    MadHi,
}

/// Integer one-operand operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IUn {
    Abs,
    Neg,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
}

/// Float two-operand operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    /// `min.NaN`: NaN if either input is NaN.
    MinNaN,
    /// `max.NaN`
    MaxNaN,
    Copysign,
}

/// Float one-operand operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FUn {
    Abs,
    Neg,
    Rcp,
    Sqrt,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
}

/// Float modifiers shared by float arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FMods {
    pub rnd: Rnd,
    pub ftz: bool,
    pub sat: bool,
}

/// `setp` comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

impl Cmp {
    /// The comparison a `setp`/`set` modifier names.
    pub(crate) fn parse(f: &str) -> Option<Cmp> {
        Some(match f {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" => Cmp::Lt,
            "le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "ge" => Cmp::Ge,
            "lo" => Cmp::Lo,
            "ls" => Cmp::Ls,
            "hi" => Cmp::Hi,
            "hs" => Cmp::Hs,
            "equ" => Cmp::Equ,
            "neu" => Cmp::Neu,
            "ltu" => Cmp::Ltu,
            "leu" => Cmp::Leu,
            "gtu" => Cmp::Gtu,
            "geu" => Cmp::Geu,
            "num" => Cmp::Num,
            "nan" => Cmp::Nan,
            _ => return None,
        })
    }
}

/// `setp`'s optional combination with a third predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoolOp {
    None,
    And,
    Or,
    Xor,
}

/// Atomic operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Add,
    Min,
    Max,
    Inc,
    Dec,
    And,
    Or,
    Xor,
    Exch,
    Cas,
}

/// Shuffle modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

/// Vote modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// Special registers whose value changes while a warp runs (the rest are preloaded registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dyn {
    Clock,
    Clock64,
    GlobalTimer,
}

/// Per-lane constants preloaded into hidden registers when a warp starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Preload {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    LaneMaskEq,
    LaneMaskLt,
    LaneMaskLe,
    LaneMaskGt,
    LaneMaskGe,
    /// Zero-valued registers (%smid, %gridid…).
    Zero,
    /// Device address of module global number n.
    GlobalAddr(u32),
    /// Shared-space offset of dynamic shared memory (after the static part).
    DynSmemBase,
    DynSmemSize,
    TotalSmemSize,
    /// A scalar kernel parameter (`ld.param` of the kernel's own parameters becomes a move).
    Param {
        off: u32,
        ty: Ty,
    },
}

/// A local-memory byte copy `(src, dst, len)` used to pass call arguments and results.
pub(crate) type Copy3 = (u32, u32, u32);
