//! The instruction set's ops, declared once: one enum per family of `isa::Family` (the
//! executor has one module per family, `vm/exec/`), the instruction that carries an op with its
//! guard and source line, and the decoded kernel. Operand types are in the parent module.

use super::{
    Addr, AtomOp, BoolOp, CarryKind, Cmp, Copy3, Dyn, FMods, FOp, FUn, IOp, IUn, MadKind, Preload,
    Reg, Rnd, ShflMode, Space, Src, Ty, VoteMode,
};

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
    /// `bmsk`, `szext` (`c` unused) and `fns`.
    Bits {
        f: BitFn,
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
    /// `cp.async` with a source size or `ignore-src` (boxed: rare).
    CpFill(Box<CpFill>),
    /// `ldmatrix` (boxed: rare, and inline it would grow every op).
    Ldmatrix(Box<super::matrix::MatrixAccess>),
    /// `stmatrix`.
    Stmatrix(Box<super::matrix::MatrixAccess>),
    /// `wmma.load` (boxed, as the other matrix accesses).
    WmmaLoad(Box<super::matrix::WmmaAccess>),
    /// `wmma.store`.
    WmmaStore(Box<super::matrix::WmmaAccess>),
    /// `wmma.mma`: registers only, but one opcode with `wmma`'s loads and stores, whose family
    /// is this one.
    WmmaMma(Box<super::matrix::WmmaMma>),
    /// `mbarrier`'s operations on a barrier object in memory.
    Mbarrier(Box<Mbarrier>),
}

/// An `mbarrier` operation: on the 8-byte object at `addr`, with `a` its operand (the count,
/// the state or the phase parity) and `d` its result (the state, or the wait's predicate).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mbarrier {
    pub kind: MbarrierKind,
    pub space: Space,
    pub addr: Addr,
    pub d: Reg,
    pub a: Src,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MbarrierKind {
    /// `init`: `a` arrivals expected each phase, phase 0.
    Init,
    /// `inval`.
    Inval,
    /// `arrive` (`drop`: and expect `a` fewer from the next phase on; `complete`: may end the
    /// phase, which `.noComplete` promises it does not).
    Arrive { drop: bool, complete: bool },
    /// `test_wait` and `try_wait` (ptxvm never suspends: a try is a test): whether the phase
    /// of the state `a` (or, with `parity`, of parity `a`) has completed.
    Wait { parity: bool },
}

/// `cp.async.{ca,cg}.shared.global [dst], [src], size, src_size|ignore_src`: `src_size` bytes
/// read (none when `ignore` is set), the rest of the `size` written as zeros. ptxvm copies when
/// it is issued, as for the plain form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CpFill {
    pub dsp: Space,
    pub dst: Addr,
    pub ssp: Space,
    pub src: Addr,
    pub size: u8,
    pub src_size: Src,
    /// A predicate (`Imm(0)` without one).
    pub ignore: Src,
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
    /// `bar.warp.sync`: a no-op while the warp runs converged; lanes that run ahead of a spinning
    /// group (schedule.rs, "forward progress") wait here for it.
    WarpSync,
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

/// The bit-field functions of sm_70 and later whose PTX names a mode: `bmsk` and `szext` clamp
/// or wrap their bit counts; `fns` finds the n-th set bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BitFn {
    Bmsk { clamp: bool },
    Szext { clamp: bool, signed: bool },
    Fns,
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
    /// `m`: the member mask (all ones for `vote` without `.sync`).
    Vote {
        mode: VoteMode,
        d: Reg,
        a: Src,
        neg: bool,
        m: Src,
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
        m: Src,
    },
    Redux {
        op: IOp,
        ty: Ty,
        d: Reg,
        a: Src,
        m: Src,
    },
    /// `elect.sync d|p, membermask`: the lowest active lane of the mask leads.
    Elect {
        d: Reg,
        p: Reg,
        m: Src,
    },
    /// `mma.sync.aligned`: the warp's fragments of A, B and C in, its fragments of D out.
    Mma(Box<super::matrix::MmaOp>),
    /// `movmatrix.sync.aligned.m8n8.trans.b16`: the warp's 8×8 b16 matrix, transposed.
    Movmatrix {
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
