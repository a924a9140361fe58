//! The decoded program: flat instructions with register indices, resolved branch targets and
//! operand kinds decided once at load. The VM executes this and nothing else.
//!
//! Register values are 64-bit lanes. Writers may leave garbage above their type's width; every
//! reader masks or sign-extends from its own type, so no instruction depends on high bits.

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
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f16" => Ty::F16,
            "f16x2" => Ty::F16x2,
            "bf16" => Ty::Bf16,
            "bf16x2" => Ty::Bf16x2,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
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

/// One decoded instruction: an op of one family of the instruction set (`isa::Family`); the
/// executor has one module per family (`vm/exec/`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Arith(ArithOp),
    Memory(MemoryOp),
    Control(ControlOp),
    Collective(CollectiveOp),
    Texture(TextureOp),
}

impl Op {
    /// The family that executes it.
    #[cfg(test)]
    pub(crate) fn family(&self) -> crate::isa::Family {
        use crate::isa::Family;
        match self {
            Op::Arith(_) => Family::Arith,
            Op::Memory(_) => Family::Memory,
            Op::Control(_) => Family::Control,
            Op::Collective(_) => Family::Collective,
            Op::Texture(_) => Family::Texture,
        }
    }
}

impl From<ArithOp> for Op {
    fn from(op: ArithOp) -> Op {
        Op::Arith(op)
    }
}

impl From<MemoryOp> for Op {
    fn from(op: MemoryOp) -> Op {
        Op::Memory(op)
    }
}

impl From<ControlOp> for Op {
    fn from(op: ControlOp) -> Op {
        Op::Control(op)
    }
}

impl From<TextureOp> for Op {
    fn from(op: TextureOp) -> Op {
        Op::Texture(op)
    }
}

impl From<CollectiveOp> for Op {
    fn from(op: CollectiveOp) -> Op {
        Op::Collective(op)
    }
}

/// Register arithmetic, logic, comparison, conversion and moves (`Family::Arith`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArithOp {
    Mov {
        d: Reg,
        a: Src,
    },
    Dyn {
        d: Reg,
        which: Dyn,
    },
    Pack {
        d: Reg,
        parts: [Src; 4],
        n: u8,
        ebits: u8,
    },
    Unpack {
        ds: [Reg; 4],
        n: u8,
        a: Src,
        ebits: u8,
    },
    IBin {
        op: IOp,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
    },
    IMad {
        kind: MadKind,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    IUn {
        op: IUn,
        ty: Ty,
        d: Reg,
        a: Src,
    },
    FBin {
        op: FOp,
        ty: Ty,
        m: FMods,
        d: Reg,
        a: Src,
        b: Src,
    },
    Fma {
        ty: Ty,
        m: FMods,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    FUn {
        op: FUn,
        ty: Ty,
        m: FMods,
        d: Reg,
        a: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        d: Reg,
        dn: Reg,
        a: Src,
        b: Src,
        comb: BoolOp,
        c: Src,
        cneg: bool,
    },
    Selp {
        d: Reg,
        a: Src,
        b: Src,
        p: Src,
    },
    Slct {
        fsel: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfe {
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfi {
        wide: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        e: Src,
    },
    Prmt {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Testp {
        op: u8,
        ty: Ty,
        d: Reg,
        a: Src,
    },
    Cvt {
        dt: Ty,
        st: Ty,
        rnd: Rnd,
        int_rnd: bool,
        sat: bool,
        ftz: bool,
        d: Reg,
        a: Src,
    },
    Cvta {
        to_generic: bool,
        space: Space,
        d: Reg,
        a: Src,
    },
    Lop3 {
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        lut: u8,
    },
    IsSpace {
        space: Space,
        d: Reg,
        a: Src,
    },
    /// `cvt.rn.f16x2.f32 d, a, b`: a to the upper half, b to the lower.
    CvtPack {
        bf: bool,
        d: Reg,
        a: Src,
        b: Src,
    },
    /// Funnel shift of the 64-bit `{b, a}`.
    Shf {
        left: bool,
        wrap: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Bfind {
        ty: Ty,
        shiftamt: bool,
        d: Reg,
        a: Src,
    },
    /// Extended-precision add/sub/mad reading and/or writing the carry flag register `cc`.
    Carry {
        kind: CarryKind,
        cin: bool,
        cout: bool,
        ty: Ty,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
        cc: Reg,
    },
    Dp4a {
        sa: bool,
        sb: bool,
        d: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
}

/// Loads, stores and atomics (`Family::Memory`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MemoryOp {
    Ld {
        space: Space,
        ty: Ty,
        n: u8,
        ds: [Reg; 4],
        addr: Addr,
    },
    St {
        space: Space,
        ty: Ty,
        n: u8,
        srcs: [Src; 4],
        addr: Addr,
    },
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        d: Reg,
        addr: Addr,
        b: Src,
        c: Src,
    },
}

/// Branches, calls, returns, exits, traps, barriers and no-ops (`Family::Control`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ControlOp {
    Bra {
        target: u32,
    },
    /// `brx.idx`: each lane jumps to `targets[idx]`.
    Brx {
        idx: Src,
        targets: Box<[u32]>,
    },
    Call {
        target: u32,
        args: Box<[Copy3]>,
    },
    /// Runs at the call's return point: copies the callee's results to the caller's variables.
    CallRet {
        rets: Box<[Copy3]>,
    },
    Ret,
    Exit,
    Bar {
        id: Src,
    },
    Nop,
    Trap,
    /// CUDA's `__assertfail(message, file, line, function, charSize)`: the local offsets of
    /// the five `.param` arguments; stops the kernel with `FaultKind::AssertFailed`.
    AssertFail {
        args: Box<[u32]>,
    },
    /// CUDA's `vprintf(format, args)`: local offsets of the two `.param` arguments and of the
    /// 32-bit result, if the call takes it.
    Vprintf {
        format: u32,
        args: u32,
        ret: Option<u32>,
    },
}

/// Warp collectives: lanes exchanging values (`Family::Collective`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CollectiveOp {
    Shfl {
        mode: ShflMode,
        d: Reg,
        dp: Reg,
        a: Src,
        b: Src,
        c: Src,
    },
    Vote {
        mode: VoteMode,
        d: Reg,
        a: Src,
        neg: bool,
    },
    Activemask {
        d: Reg,
    },
    Match {
        all: bool,
        wide: bool,
        d: Reg,
        dp: Reg,
        a: Src,
    },
    Redux {
        op: IOp,
        ty: Ty,
        d: Reg,
        a: Src,
    },
}

/// A texture or surface instruction's geometry: `.1d`, `.2d`, `.3d`, or a layered `.a1d` /
/// `.a2d` (whose layer index is the instruction's z coordinate here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Geom {
    D1,
    D2,
    D3,
    A1,
    A2,
}

/// What `txq`/`suq` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageQuery {
    Width,
    Height,
    Depth,
}

/// A surface access outside the surface: `.trap` faults, `.clamp` uses the nearest texel,
/// `.zero` loads zeros and drops stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Oob {
    Trap,
    Clamp,
    Zero,
}

/// Texture and surface instructions (`Family::Texture`). Coordinates are `[x, y, z]`, unused
/// ones `Imm(0)`; for a layered geometry z is the layer index (an integer).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TextureOp {
    /// `tex.geom.v4.dty.cty` (a sampled read) or `tld4.comp.2d.v4.dty.f32` (a gather).
    Tex {
        geom: Geom,
        read: crate::image::Read,
        ds: [Reg; 4],
        handle: Reg,
        coords: [Src; 3],
    },
    /// `txq` (texture) or `suq` (surface).
    Query {
        surface: bool,
        q: ImageQuery,
        d: Reg,
        handle: Reg,
    },
    /// `suld.b.geom{.v2,.v4}.bN.oob`: `n` elements of `bytes` bytes at byte x.
    Suld {
        geom: Geom,
        oob: Oob,
        bytes: u8,
        n: u8,
        ds: [Reg; 4],
        handle: Reg,
        coords: [Src; 3],
    },
    /// `sust.b.geom{.v2,.v4}.bN.oob`.
    Sust {
        geom: Geom,
        oob: Oob,
        bytes: u8,
        n: u8,
        srcs: [Src; 4],
        handle: Reg,
        coords: [Src; 3],
    },
}

/// An instruction with its guard and source line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inst {
    pub op: Op,
    /// Guard predicate register, or `NO_REG`.
    pub guard: Reg,
    pub guard_neg: bool,
    pub line: u32,
}

/// A kernel ready to run.
#[derive(Debug)]
pub(crate) struct Kernel {
    pub info: crate::api::KernelInfo,
    pub code: Vec<Inst>,
    pub nregs: u32,
    pub preloads: Vec<(Reg, Preload)>,
    pub local_bytes: u32,
}
