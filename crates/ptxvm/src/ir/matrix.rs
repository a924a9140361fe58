//! The warp-level matrix instructions' decoded form (`mma.sync.aligned`, `movmatrix`): the
//! shapes and element types ptxvm runs, and where each lane's fragment elements sit in the
//! matrices (PTX ISA 9.7.14.5, "Matrix fragments for mma"). The lowering checks an instruction
//! against these tables once; the executor (`vm/exec/matrix.rs`) reads them per lane.

use super::{Reg, Src};

/// An `mma` shape: `M`×`N` results from `K`-long dot products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `.m16n8k16`: f16/bf16 (A 4 registers, B 2) or s8/u8 (A 2, B 1).
    M16n8k16,
    /// `.m16n8k8`: f16/bf16 (A 2, B 1) or tf32 (A 4, B 2).
    M16n8k8,
    /// `.m16n8k4`: tf32 (A 2, B 1).
    M16n8k4,
    /// `.m16n8k32`: s8/u8 (A 4, B 2).
    M16n8k32,
    /// `.m8n8k16`: s8/u8 (A 1, B 1, C/D 2).
    M8n8k16,
    /// `.m8n8k4`: f64 (A 1, B 1, C/D 2). Its f16 form (Volta's quad-pair layout) is not run.
    M8n8k4,
}

impl Shape {
    /// The shape's modifier name, without its dot.
    pub(crate) fn parse(s: &str) -> Option<Shape> {
        Some(match s {
            "m16n8k16" => Shape::M16n8k16,
            "m16n8k8" => Shape::M16n8k8,
            "m16n8k4" => Shape::M16n8k4,
            "m16n8k32" => Shape::M16n8k32,
            "m8n8k16" => Shape::M8n8k16,
            "m8n8k4" => Shape::M8n8k4,
            _ => return None,
        })
    }

    /// `(M, N, K)`.
    pub(crate) fn mnk(self) -> (usize, usize, usize) {
        match self {
            Shape::M16n8k16 => (16, 8, 16),
            Shape::M16n8k8 => (16, 8, 8),
            Shape::M16n8k4 => (16, 8, 4),
            Shape::M16n8k32 => (16, 8, 32),
            Shape::M8n8k16 => (8, 8, 16),
            Shape::M8n8k4 => (8, 8, 4),
        }
    }
}

/// An element type of an `mma` operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    F16,
    Bf16,
    /// TensorFloat-32: an f32 register whose low 13 mantissa bits the multiply ignores.
    Tf32,
    F32,
    F64,
    S8,
    U8,
    S32,
}

impl Elem {
    /// The type's modifier name, without its dot.
    pub(crate) fn parse(s: &str) -> Option<Elem> {
        Some(match s {
            "f16" => Elem::F16,
            "bf16" => Elem::Bf16,
            "tf32" => Elem::Tf32,
            "f32" => Elem::F32,
            "f64" => Elem::F64,
            "s8" => Elem::S8,
            "u8" => Elem::U8,
            "s32" => Elem::S32,
            _ => return None,
        })
    }

    /// Width in bits of one element (several small ones share a 32-bit register, low first).
    pub(crate) fn bits(self) -> u32 {
        match self {
            Elem::S8 | Elem::U8 => 8,
            Elem::F16 | Elem::Bf16 => 16,
            Elem::Tf32 | Elem::F32 | Elem::S32 => 32,
            Elem::F64 => 64,
        }
    }

    /// Elements one register holds.
    pub(crate) fn per_reg(self) -> usize {
        match self.bits() {
            64 => 1,
            b => (32 / b) as usize,
        }
    }

    /// Whether the products and sums are integers.
    pub(crate) fn is_int(self) -> bool {
        matches!(self, Elem::S8 | Elem::U8 | Elem::S32)
    }
}

/// Which `mma` operand a fragment belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    A,
    B,
    /// C and D share a layout.
    C,
}

/// The row and column (for B: row `k`, column `n`) of element `i` of lane `lane`'s fragment of
/// `part`, for an operand of type `ty` in shape `shape`. The lowering only builds the
/// combinations this covers.
pub(crate) fn position(
    shape: Shape,
    part: Part,
    ty: Elem,
    lane: usize,
    i: usize,
) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane & 3);
    let half = matches!(ty, Elem::F16 | Elem::Bf16);
    match (part, shape) {
        (Part::C, _) if shape.mnk().0 == 16 => (g + 8 * (i >> 1), t * 2 + (i & 1)),
        (Part::C, _) => (g, t * 2 + i),
        (Part::A, Shape::M16n8k16) if half => {
            (g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >> 2))
        }
        (Part::A, Shape::M16n8k16) => (g + 8 * (i >> 2), t * 4 + (i & 3)),
        (Part::A, Shape::M16n8k8) if half => (g + 8 * (i >> 1), t * 2 + (i & 1)),
        (Part::A, Shape::M16n8k8) => (g + 8 * (i & 1), t + 4 * (i >> 1)),
        (Part::A, Shape::M16n8k4) => (g + 8 * i, t),
        (Part::A, Shape::M16n8k32) => (g + 8 * ((i >> 2) & 1), t * 4 + (i & 3) + 16 * (i >> 3)),
        (Part::A, Shape::M8n8k16) => (g, t * 4 + i),
        (Part::A, Shape::M8n8k4) => (g, t),
        (Part::B, Shape::M16n8k16) if half => (t * 2 + (i & 1) + 8 * (i >> 1), g),
        (Part::B, Shape::M16n8k16 | Shape::M8n8k16) => (t * 4 + i, g),
        (Part::B, Shape::M16n8k8) if half => (t * 2 + i, g),
        (Part::B, Shape::M16n8k8) => (t + 4 * i, g),
        (Part::B, Shape::M16n8k4 | Shape::M8n8k4) => (t, g),
        (Part::B, Shape::M16n8k32) => (t * 4 + (i & 3) + 16 * (i >> 2), g),
    }
}

/// Elements of `part` each lane holds.
pub(crate) fn per_lane(shape: Shape, part: Part) -> usize {
    let (m, n, k) = shape.mnk();
    match part {
        Part::A => m * k / 32,
        Part::B => k * n / 32,
        Part::C => m * n / 32,
    }
}

/// Registers of type `ty` that hold one lane's fragment of `part`.
pub(crate) fn regs(shape: Shape, part: Part, ty: Elem) -> usize {
    per_lane(shape, part).div_ceil(ty.per_reg())
}

/// A decoded `mma.sync.aligned.SHAPE.row.col{.satfinite}.D.A.B.C d, a, b, c`. Boxed in
/// `CollectiveOp`: it is rare, and inline it would grow every op.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MmaOp {
    pub shape: Shape,
    pub d_ty: Elem,
    pub a_ty: Elem,
    pub b_ty: Elem,
    pub c_ty: Elem,
    /// Integer results clamp to the s32 range instead of wrapping.
    pub satfinite: bool,
    /// Unused trailing slots hold the sink register / zero.
    pub d: [Reg; 4],
    pub a: [Src; 4],
    pub b: [Src; 2],
    pub c: [Src; 4],
}

/// A decoded `ldmatrix`/`stmatrix.sync.aligned.m8n8.xN{.trans}{.shared}.b16`: `n` 8×8 b16
/// matrices, row `r` of matrix `j` at the address lane `8j + r` gives; register `j` of lane
/// `l` holds matrix `j`'s row `l / 4`, columns `2(l % 4)` and `+1` (its column, with `trans`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MatrixAccess {
    pub space: super::Space,
    pub addr: super::Addr,
    /// 1, 2 or 4 matrices.
    pub n: u8,
    pub trans: bool,
    /// `ldmatrix`'s destinations (unused slots the sink).
    pub d: [Reg; 4],
    /// `stmatrix`'s sources.
    pub s: [Src; 4],
}

/// A `wmma` shape: `m16n16k16`, `m32n8k16` and `m8n32k16` (f16, bf16, s8 and u8
/// multiplicands), `m16n16k8` (tf32) and `m8n8k4` (f64). Which types each takes is
/// [`WmmaShape::regs`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WmmaShape {
    pub m: u8,
    pub n: u8,
    pub k: u8,
}

impl WmmaShape {
    pub(crate) fn parse(s: &str) -> Option<WmmaShape> {
        let (m, n, k) = match s {
            "m16n16k16" => (16, 16, 16),
            "m32n8k16" => (32, 8, 16),
            "m8n32k16" => (8, 32, 16),
            "m16n16k8" => (16, 16, 8),
            "m8n8k4" => (8, 8, 4),
            _ => return None,
        };
        Some(WmmaShape { m, n, k })
    }

    /// Rows and columns of `part`'s matrix (C's for D).
    pub(crate) fn dims(self, part: Part) -> (usize, usize) {
        let (m, n, k) = (
            usize::from(self.m),
            usize::from(self.n),
            usize::from(self.k),
        );
        match part {
            Part::A => (m, k),
            Part::B => (k, n),
            Part::C => (m, n),
        }
    }

    /// Registers of `part`'s fragment of `ty` (C's for D), or `None` where the ISA has no such
    /// fragment. Each holds its lane's share of the matrix, `per_reg` elements a register,
    /// except f16 A and B, which the ISA gives eight registers whatever the shape.
    pub(crate) fn regs(self, part: Part, ty: Elem) -> Option<usize> {
        let exists = matches!(
            (self.k, part, ty),
            (
                16,
                Part::A | Part::B,
                Elem::F16 | Elem::Bf16 | Elem::S8 | Elem::U8
            ) | (16, Part::C, Elem::F16 | Elem::F32 | Elem::S32)
                | (8, Part::A | Part::B, Elem::Tf32)
                | (8, Part::C, Elem::F32)
                | (4, _, Elem::F64)
        );
        if !exists {
            return None;
        }
        if ty == Elem::F16 && part != Part::C {
            return Some(8);
        }
        let (rows, cols) = self.dims(part);
        Some((rows * cols / 32).div_ceil(ty.per_reg()))
    }

    /// Bytes of `part`'s fragment of `ty`: the ISA asks each row (or column) of the matrix in
    /// memory to start on a multiple of it.
    pub(crate) fn fragment_bytes(self, part: Part, ty: Elem) -> Option<u64> {
        let reg = if ty == Elem::F64 { 8 } else { 4 };
        self.regs(part, ty).map(|n| n as u64 * reg)
    }
}

/// Row and column of element `e` of lane `lane`'s `wmma` fragment. The PTX ISA leaves the
/// layout to the implementation, so ptxvm picks one: lane `l` holds elements `l·u .. l·u + u`
/// of the row-major matrix (`u` = elements / 32), and a fragment with more slots than that
/// (f16 A and B: 16 slots for 8 elements) repeats them. Loads, the multiply and stores agree
/// on it; code that only reads and writes fragments element by element cannot tell.
pub(crate) fn wmma_position(dims: (usize, usize), lane: usize, e: usize) -> (usize, usize) {
    let u = dims.0 * dims.1 / 32;
    let idx = lane * u + e % u;
    (idx / dims.1, idx % dims.1)
}

/// A decoded `wmma.load`/`wmma.store`: fragment `part` (C's layout for D) of `shape`, its
/// matrix at `addr` with leading dimension `stride` (elements; `None`: the matrix's own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WmmaAccess {
    pub part: Part,
    pub shape: WmmaShape,
    pub ty: Elem,
    pub row_major: bool,
    pub space: super::Space,
    pub addr: super::Addr,
    pub stride: Option<Src>,
    /// The load's destinations (unused slots the sink).
    pub d: [Reg; 8],
    /// The store's sources.
    pub s: [Src; 8],
}

/// A decoded `wmma.mma.sync.aligned.alayout.blayout.shape.dtype{.atype.btype}.ctype d, a, b, c`
/// (f16 multiplicands when the types are two).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WmmaMma {
    pub shape: WmmaShape,
    pub d_ty: Elem,
    pub a_ty: Elem,
    pub b_ty: Elem,
    pub c_ty: Elem,
    /// Integer sums clamp to s32 rather than wrap.
    pub satfinite: bool,
    pub d: [Reg; 8],
    pub a: [Src; 8],
    pub b: [Src; 8],
    pub c: [Src; 8],
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape's layout puts each matrix element in exactly one lane's fragment.
    #[test]
    fn every_fragment_layout_covers_each_element_once() {
        let combos = [
            (Shape::M16n8k16, Elem::F16),
            (Shape::M16n8k16, Elem::S8),
            (Shape::M16n8k8, Elem::F16),
            (Shape::M16n8k8, Elem::Tf32),
            (Shape::M16n8k4, Elem::Tf32),
            (Shape::M16n8k32, Elem::S8),
            (Shape::M8n8k16, Elem::S8),
            (Shape::M8n8k4, Elem::F64),
        ];
        for (shape, ty) in combos {
            let (m, n, k) = shape.mnk();
            for (part, rows, cols) in [(Part::A, m, k), (Part::B, k, n), (Part::C, m, n)] {
                let mut seen = vec![0u32; rows * cols];
                for lane in 0..32 {
                    for i in 0..per_lane(shape, part) {
                        let (r, c) = position(shape, part, ty, lane, i);
                        assert!(r < rows && c < cols, "{shape:?} {part:?} lane {lane} i {i}");
                        seen[r * cols + c] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "{shape:?} {ty:?} {part:?}: {seen:?}"
                );
            }
        }
    }

    #[test]
    fn every_wmma_layout_holds_each_element_and_repeats_it_only_in_spare_slots() {
        let types = [
            Elem::F16,
            Elem::Bf16,
            Elem::Tf32,
            Elem::F32,
            Elem::F64,
            Elem::S8,
            Elem::U8,
            Elem::S32,
        ];
        let mut fragments = 0;
        for shape in ["m16n16k16", "m32n8k16", "m8n32k16", "m16n16k8", "m8n8k4"] {
            let shape = WmmaShape::parse(shape).unwrap();
            for (part, ty) in [Part::A, Part::B, Part::C]
                .into_iter()
                .flat_map(|p| types.map(|t| (p, t)))
                .filter(|&(p, t)| shape.regs(p, t).is_some())
            {
                fragments += 1;
                let dims = shape.dims(part);
                let slots = shape.regs(part, ty).unwrap() * ty.per_reg();
                let mut seen = vec![0usize; dims.0 * dims.1];
                for lane in 0..32 {
                    for e in 0..slots {
                        let (r, c) = wmma_position(dims, lane, e);
                        seen[r * dims.1 + c] += 1;
                    }
                }
                let copies = slots * 32 / (dims.0 * dims.1);
                assert!(
                    seen.iter().all(|&n| n == copies),
                    "{shape:?} {part:?} {ty:?}"
                );
            }
        }
        // Per k16 shape: A and B in f16, bf16, s8, u8; C in f16, f32, s32. Then tf32's three
        // and f64's three.
        assert_eq!(fragments, 3 * 11 + 3 + 3);
    }

    #[test]
    fn wmma_fragment_sizes_match_the_isa() {
        let s = |t| WmmaShape::parse(t).unwrap();
        let (big, tall, wide) = (s("m16n16k16"), s("m32n8k16"), s("m8n32k16"));
        assert_eq!(big.regs(Part::A, Elem::Bf16), Some(4));
        assert_eq!(tall.regs(Part::A, Elem::Bf16), Some(8));
        assert_eq!(wide.regs(Part::B, Elem::Bf16), Some(8));
        assert_eq!(big.regs(Part::A, Elem::S8), Some(2));
        assert_eq!(wide.regs(Part::A, Elem::U8), Some(1));
        assert_eq!(big.regs(Part::C, Elem::S32), Some(8));
        assert_eq!(s("m16n16k8").regs(Part::A, Elem::Tf32), Some(4));
        assert_eq!(s("m8n8k4").regs(Part::C, Elem::F64), Some(2));
        assert_eq!(s("m8n8k4").fragment_bytes(Part::A, Elem::F64), Some(8));
        assert_eq!(big.fragment_bytes(Part::A, Elem::F16), Some(32));
        assert_eq!(big.fragment_bytes(Part::C, Elem::F16), Some(16));
        assert_eq!(big.regs(Part::A, Elem::Tf32), None);
        assert_eq!(s("m16n16k8").regs(Part::A, Elem::F16), None);
    }

    #[test]
    fn m16n8k16_half_fragments_match_the_isa_examples() {
        // Lane 5: groupID 1, threadID_in_group 1. a0 (1, 2), a3 (9, 3), a4 (1, 10), a7 (9, 11).
        let a = |i| position(Shape::M16n8k16, Part::A, Elem::F16, 5, i);
        assert_eq!([a(0), a(3), a(4), a(7)], [(1, 2), (9, 3), (1, 10), (9, 11)]);
        // b0 (2, 1), b3 (11, 1); c2 (9, 2).
        assert_eq!(position(Shape::M16n8k16, Part::B, Elem::F16, 5, 0), (2, 1));
        assert_eq!(position(Shape::M16n8k16, Part::B, Elem::F16, 5, 3), (11, 1));
        assert_eq!(position(Shape::M16n8k16, Part::C, Elem::F32, 5, 2), (9, 2));
        assert_eq!(regs(Shape::M16n8k16, Part::A, Elem::F16), 4);
        assert_eq!(regs(Shape::M16n8k32, Part::B, Elem::S8), 2);
        assert_eq!(regs(Shape::M8n8k4, Part::C, Elem::F64), 2);
    }
}
