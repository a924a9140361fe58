//! Scalar semantics of the arithmetic instructions, one lane at a time. The warp loop calls
//! these inside per-instruction lane loops; fast paths for the commonest forms live in `exec`.

use super::float::{from_half, ftz32, round_f32, round_f64, sat, to_half, two_prod, two_sum};
use crate::ir::{CarryKind, Cmp, FMods, FOp, FUn, IOp, IUn, MadKind, Rnd, Ty, norm};

/// Integer binary op on raw register values.
pub(crate) fn ibin(op: IOp, ty: Ty, a: u64, b: u64) -> u64 {
    let bits = ty.bits();
    let (x, y) = (norm(ty, a), norm(ty, b));
    let s = ty.signed();
    match op {
        IOp::Add => a.wrapping_add(b),
        IOp::Sub => a.wrapping_sub(b),
        IOp::AddSat => (x as i32).saturating_add(y as i32) as u32 as u64,
        IOp::SubSat => (x as i32).saturating_sub(y as i32) as u32 as u64,
        IOp::MulLo => a.wrapping_mul(b),
        IOp::MulHi => {
            let p = if s {
                ((x as i64 as i128) * (y as i64 as i128)) as u128
            } else {
                u128::from(x) * u128::from(y)
            };
            (p >> bits) as u64
        }
        IOp::MulWide => {
            if s {
                (x as i64).wrapping_mul(y as i64) as u64
            } else {
                x.wrapping_mul(y)
            }
        }
        IOp::Div => {
            if y == 0 {
                u64::MAX
            } else if s {
                (x as i64).wrapping_div(y as i64) as u64
            } else {
                x / y
            }
        }
        IOp::Rem => {
            if y == 0 {
                x
            } else if s {
                (x as i64).wrapping_rem(y as i64) as u64
            } else {
                x % y
            }
        }
        IOp::Min => {
            if s {
                (x as i64).min(y as i64) as u64
            } else {
                x.min(y)
            }
        }
        IOp::Max => {
            if s {
                (x as i64).max(y as i64) as u64
            } else {
                x.max(y)
            }
        }
        IOp::And => a & b,
        IOp::Or => a | b,
        IOp::Xor => a ^ b,
        IOp::Shl => {
            let n = b as u32;
            if n >= bits { 0 } else { a << n }
        }
        IOp::Shr => {
            let n = (b as u32).min(63);
            if s {
                ((x as i64) >> n) as u64
            } else if n >= bits {
                0
            } else {
                x >> n
            }
        }
    }
}

/// Integer multiply-add.
pub(crate) fn imad(kind: MadKind, ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    match kind {
        MadKind::Lo => a.wrapping_mul(b).wrapping_add(c),
        MadKind::Hi => ibin(IOp::MulHi, ty, a, b).wrapping_add(c),
        MadKind::Wide => ibin(IOp::MulWide, ty, a, b).wrapping_add(c),
        MadKind::Lo24 | MadKind::Hi24 => {
            let t = |v: u64| {
                let x = v & 0x00ff_ffff;
                if ty.signed() {
                    ((x << 40) as i64 >> 40) as u64
                } else {
                    x
                }
            };
            let p = t(a).wrapping_mul(t(b));
            let part = if kind == MadKind::Lo24 { p } else { p >> 16 };
            (part & 0xffff_ffff).wrapping_add(c)
        }
        MadKind::Sad => {
            let (x, y) = (norm(ty, a), norm(ty, b));
            let diff = if ty.signed() {
                (x as i64).abs_diff(y as i64)
            } else {
                x.abs_diff(y)
            };
            diff.wrapping_add(c)
        }
        MadKind::HiSat => {
            let h = ibin(IOp::MulHi, Ty::S32, a, b) as i32;
            h.saturating_add(c as i32) as u32 as u64
        }
    }
}

/// Integer unary op.
pub(crate) fn iun(op: IUn, ty: Ty, a: u64) -> u64 {
    let x = norm(ty, a);
    let bits = ty.bits();
    match op {
        IUn::Abs => (x as i64).wrapping_abs() as u64,
        IUn::Neg => (x as i64).wrapping_neg() as u64,
        IUn::Not if ty == Ty::Pred => u64::from(a & 1 == 0),
        IUn::Not => !a,
        IUn::Cnot => u64::from(x == 0),
        IUn::Popc => u64::from(norm(as_unsigned(ty), a).count_ones()),
        IUn::Clz => u64::from(norm(as_unsigned(ty), a).leading_zeros() - (64 - bits)),
        IUn::Brev => norm(as_unsigned(ty), a).reverse_bits() >> (64 - bits),
    }
}

fn as_unsigned(t: Ty) -> Ty {
    match t.bits() {
        8 => Ty::U8,
        16 => Ty::U16,
        32 => Ty::U32,
        _ => Ty::U64,
    }
}

/// Reads a float register value of type `ty` (scalar types only) as f64.
#[inline(always)]
pub(crate) fn fget(ty: Ty, v: u64, ftz: bool) -> f64 {
    match ty {
        Ty::F32 => {
            let f = f32::from_bits(v as u32);
            f64::from(if ftz { ftz32(f) } else { f })
        }
        Ty::F64 => f64::from_bits(v),
        Ty::F16 => f64::from(from_half(v as u16, false)),
        Ty::Bf16 => f64::from(from_half(v as u16, true)),
        _ => f64::from_bits(v),
    }
}

/// Writes an f64 result as type `ty` (rounding to nearest for the narrow types).
#[inline(always)]
pub(crate) fn fput(ty: Ty, x: f64, m: FMods) -> u64 {
    let x = if m.sat { sat(x) } else { x };
    match ty {
        Ty::F32 => {
            let f = x as f32;
            u64::from(if m.ftz { ftz32(f) } else { f }.to_bits())
        }
        Ty::F16 => u64::from(to_half(x, false)),
        Ty::Bf16 => u64::from(to_half(x, true)),
        _ => x.to_bits(),
    }
}

/// Applies a scalar float function to each half of a packed pair, or to the scalar.
#[inline(always)]
fn lanes2(ty: Ty, vals: [u64; 3], f: impl Fn(Ty, [u64; 3]) -> u64) -> u64 {
    match ty {
        Ty::F16x2 | Ty::Bf16x2 => {
            let t = if ty == Ty::F16x2 { Ty::F16 } else { Ty::Bf16 };
            let lo = f(t, vals.map(|v| v & 0xffff)) & 0xffff;
            let hi = f(t, vals.map(|v| (v >> 16) & 0xffff)) & 0xffff;
            lo | (hi << 16)
        }
        _ => f(ty, vals),
    }
}

/// Float binary op.
pub(crate) fn fbin(op: FOp, ty: Ty, m: FMods, a: u64, b: u64) -> u64 {
    lanes2(ty, [a, b, 0], |t, [a, b, _]| {
        let (x, y) = (fget(t, a, m.ftz), fget(t, b, m.ftz));
        let r = match (op, t) {
            (FOp::Min, _) => x.min(y),
            (FOp::Max, _) => x.max(y),
            (FOp::MinNaN | FOp::MaxNaN, _) if x.is_nan() || y.is_nan() => f64::NAN,
            (FOp::MinNaN, _) => x.min(y),
            (FOp::MaxNaN, _) => x.max(y),
            (FOp::Copysign, _) => y.copysign(x),
            (_, Ty::F32) if m.rnd != Rnd::Rn => {
                let (hi, lo) = exact(op, x, y);
                return fput(t, f64::from(round_f32(hi, lo, m.rnd)), m);
            }
            (_, Ty::F32) => {
                // Native f32 arithmetic rounds once, as the GPU does.
                let (p, q) = (x as f32, y as f32);
                f64::from(match op {
                    FOp::Add => p + q,
                    FOp::Sub => p - q,
                    FOp::Mul => p * q,
                    _ => p / q,
                })
            }
            (_, Ty::F64) if m.rnd != Rnd::Rn => {
                let (hi, lo) = exact(op, x, y);
                round_f64(hi, lo, m.rnd)
            }
            _ => match op {
                FOp::Add => x + y,
                FOp::Sub => x - y,
                FOp::Mul => x * y,
                _ => x / y,
            },
        };
        fput(t, r, m)
    })
}

/// Nearest result and exact residual of add/sub/mul/div.
fn exact(op: FOp, x: f64, y: f64) -> (f64, f64) {
    match op {
        FOp::Add => two_sum(x, y),
        FOp::Sub => two_sum(x, -y),
        FOp::Mul => two_prod(x, y),
        _ => {
            let q = x / y;
            let r = (-q).mul_add(y, x);
            (
                q,
                if r.is_finite() && y != 0.0 {
                    r / y
                } else {
                    0.0
                },
            )
        }
    }
}

/// `fma.rn.f32` on all 32 lanes. Uses the FMA unit when the CPU has one (detected at run
/// time); otherwise `f32::mul_add`, which is correctly rounded in software.
#[inline]
pub(crate) fn fma_f32_lanes(a: &[u64; 32], b: &[u64; 32], c: &[u64; 32]) -> [u64; 32] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports FMA (checked just above), the only requirement of a
            // `target_feature(enable = "fma")` function.
            return unsafe { fma_f32_lanes_fma(a, b, c) };
        }
    }
    fma_f32_lanes_plain(a, b, c)
}

#[inline(always)]
fn fma_f32_lanes_plain(a: &[u64; 32], b: &[u64; 32], c: &[u64; 32]) -> [u64; 32] {
    let f = |x: u64| f32::from_bits(x as u32);
    let mut out = [0u64; 32];
    for l in 0..32 {
        out[l] = u64::from(f(a[l]).mul_add(f(b[l]), f(c[l])).to_bits());
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma,avx2")]
fn fma_f32_lanes_fma(a: &[u64; 32], b: &[u64; 32], c: &[u64; 32]) -> [u64; 32] {
    fma_f32_lanes_plain(a, b, c)
}

/// Fused multiply-add.
pub(crate) fn fma(ty: Ty, m: FMods, a: u64, b: u64, c: u64) -> u64 {
    lanes2(ty, [a, b, c], |t, [a, b, c]| {
        let (x, y, z) = (fget(t, a, m.ftz), fget(t, b, m.ftz), fget(t, c, m.ftz));
        let r = match t {
            Ty::F32 if m.rnd == Rnd::Rn => f64::from((x as f32).mul_add(y as f32, z as f32)),
            Ty::F32 => {
                // The f32 product is exact in f64; the sum's residual comes from TwoSum.
                let (s, e) = two_sum(x * y, z);
                f64::from(round_f32(s, e, m.rnd))
            }
            Ty::F64 if m.rnd != Rnd::Rn => {
                let r = x.mul_add(y, z);
                let (p, pe) = two_prod(x, y);
                let (s, se) = two_sum(p, z);
                round_f64(r, (s - r) + se + pe, m.rnd)
            }
            _ => x.mul_add(y, z),
        };
        fput(t, r, m)
    })
}

/// Float unary op.
pub(crate) fn fun(op: FUn, ty: Ty, m: FMods, a: u64) -> u64 {
    lanes2(ty, [a, 0, 0], |t, [a, _, _]| {
        if op == FUn::Neg || op == FUn::Abs {
            // Sign-bit operations: exact, NaN payloads kept.
            let sign = 1u64 << (t.bits() - 1);
            let v = if m.ftz && t == Ty::F32 {
                u64::from(ftz32(f32::from_bits(a as u32)).to_bits())
            } else {
                a
            };
            return if op == FUn::Neg { v ^ sign } else { v & !sign };
        }
        let x = fget(t, a, m.ftz);
        let r = match op {
            FUn::Rcp if t == Ty::F32 && m.rnd != Rnd::Rn => {
                let (hi, lo) = exact(FOp::Div, 1.0, x);
                return fput(t, f64::from(round_f32(hi, lo, m.rnd)), m);
            }
            FUn::Rcp => 1.0 / x,
            FUn::Sqrt if m.rnd != Rnd::Rn && x > 0.0 => {
                let s = x.sqrt();
                let lo = (-s).mul_add(s, x) / (2.0 * s);
                if t == Ty::F32 {
                    return fput(t, f64::from(round_f32(s, lo, m.rnd)), m);
                }
                round_f64(s, lo, m.rnd)
            }
            FUn::Sqrt => x.sqrt(),
            FUn::Rsqrt => 1.0 / x.sqrt(),
            FUn::Ex2 => x.exp2(),
            FUn::Lg2 => x.log2(),
            FUn::Sin => x.sin(),
            FUn::Cos => x.cos(),
            FUn::Tanh => x.tanh(),
            FUn::Neg | FUn::Abs => x,
        };
        fput(t, r, m)
    })
}

/// `setp` comparison.
pub(crate) fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    if ty.is_float() {
        let (x, y) = (fget(ty, a, ftz), fget(ty, b, ftz));
        let un = x.is_nan() || y.is_nan();
        return match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => !un && x != y,
            Cmp::Lt | Cmp::Lo => x < y,
            Cmp::Le | Cmp::Ls => x <= y,
            Cmp::Gt | Cmp::Hi => x > y,
            Cmp::Ge | Cmp::Hs => x >= y,
            Cmp::Equ => un || x == y,
            Cmp::Neu => un || x != y,
            Cmp::Ltu => un || x < y,
            Cmp::Leu => un || x <= y,
            Cmp::Gtu => un || x > y,
            Cmp::Geu => un || x >= y,
            Cmp::Num => !un,
            Cmp::Nan => un,
        };
    }
    let (x, y) = (norm(ty, a), norm(ty, b));
    let (sx, sy) = (x as i64, y as i64);
    match cmp {
        Cmp::Eq | Cmp::Equ => x == y,
        Cmp::Ne | Cmp::Neu => x != y,
        Cmp::Lt | Cmp::Ltu if ty.signed() => sx < sy,
        Cmp::Le | Cmp::Leu if ty.signed() => sx <= sy,
        Cmp::Gt | Cmp::Gtu if ty.signed() => sx > sy,
        Cmp::Ge | Cmp::Geu if ty.signed() => sx >= sy,
        Cmp::Lt | Cmp::Ltu | Cmp::Lo => x < y,
        Cmp::Le | Cmp::Leu | Cmp::Ls => x <= y,
        Cmp::Gt | Cmp::Gtu | Cmp::Hi => x > y,
        Cmp::Ge | Cmp::Geu | Cmp::Hs => x >= y,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

/// Three-input logic op with an 8-bit truth table (`lop3.b32`).
pub(crate) fn lop3(a: u64, b: u64, c: u64, lut: u8) -> u64 {
    let mut r = 0u64;
    for i in 0..8 {
        if lut >> i & 1 != 0 {
            let x = if i & 4 != 0 { a } else { !a };
            let y = if i & 2 != 0 { b } else { !b };
            let z = if i & 1 != 0 { c } else { !c };
            r |= x & y & z;
        }
    }
    r & 0xffff_ffff
}

/// Extended-precision add/sub/mad: returns (result, carry-out). `cf` is the carry-in (0 or 1).
pub(crate) fn carry(kind: CarryKind, ty: Ty, a: u64, b: u64, c: u64, cf: u64) -> (u64, u64) {
    let bits = ty.bits();
    let m = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let (a, b, c) = (a & m, b & m, c & m);
    let wide = |x: u128| (x as u64 & m, (x >> bits) as u64 & 1);
    match kind {
        CarryKind::Add => wide(u128::from(a) + u128::from(b) + u128::from(cf)),
        CarryKind::Sub => {
            let s = i128::from(a) - i128::from(b) - i128::from(cf);
            (s as u64 & m, u64::from(s < 0))
        }
        CarryKind::MadLo | CarryKind::MadHi => {
            let p = if ty.signed() {
                (i128::from(norm(ty, a) as i64) * i128::from(norm(ty, b) as i64)) as u128
            } else {
                u128::from(a) * u128::from(b)
            };
            let pm = if bits == 64 {
                u128::from(u64::MAX)
            } else {
                u128::from(m)
            };
            let part = if kind == CarryKind::MadHi {
                (p >> bits) & pm
            } else {
                p & pm
            };
            wide(part + u128::from(c) + u128::from(cf))
        }
    }
}

/// Funnel shift (`shf`): `{b, a}` shifted, 32 bits kept.
pub(crate) fn shf(left: bool, wrap: bool, a: u64, b: u64, c: u64) -> u64 {
    let n = if wrap {
        c as u32 & 31
    } else {
        (c as u32).min(32)
    };
    let v = (u64::from(b as u32) << 32) | u64::from(a as u32);
    if left {
        (v << n) >> 32
    } else {
        (v >> n) & 0xffff_ffff
    }
}

/// Most significant non-sign bit (`bfind`); all ones when there is none.
pub(crate) fn bfind(ty: Ty, shiftamt: bool, a: u64) -> u64 {
    let bits = ty.bits();
    let x = norm(ty, a);
    let x = if ty.signed() && (x as i64) < 0 { !x } else { x };
    let x = if bits == 64 {
        x
    } else {
        x & ((1u64 << bits) - 1)
    };
    if x == 0 {
        return 0xffff_ffff;
    }
    let pos = 63 - u64::from(x.leading_zeros());
    if shiftamt {
        u64::from(bits - 1) - pos
    } else {
        pos
    }
}

/// Four-way byte dot product plus accumulator (`dp4a`).
pub(crate) fn dp4a(sa: bool, sb: bool, a: u64, b: u64, c: u64) -> u64 {
    let byte = |v: u64, i: u32, s: bool| {
        let x = (v >> (8 * i)) & 0xff;
        if s {
            i64::from(x as u8 as i8)
        } else {
            x as i64
        }
    };
    let mut acc = c as u32 as i32 as i64;
    for i in 0..4 {
        acc = acc.wrapping_add(byte(a, i, sa) * byte(b, i, sb));
    }
    acc as u64 & 0xffff_ffff
}

/// Bit-field extract.
pub(crate) fn bfe(ty: Ty, a: u64, pos: u64, len: u64) -> u64 {
    let bits = u64::from(ty.bits());
    let (pos, len) = (pos & 0xff, len & 0xff);
    let x = norm(as_unsigned(ty), a);
    let msb = if ty.signed() {
        if len == 0 {
            false
        } else {
            let top = (pos + len - 1).min(bits - 1);
            (x >> top) & 1 == 1
        }
    } else {
        false
    };
    let mut out = 0u64;
    for i in 0..bits {
        let bit = if i < len && pos + i < bits {
            (x >> (pos + i)) & 1
        } else {
            u64::from(msb)
        };
        out |= bit << i;
    }
    out
}

/// Bit-field insert: `b` with `len` bits from `a` at `pos`.
pub(crate) fn bfi(wide: bool, a: u64, b: u64, pos: u64, len: u64) -> u64 {
    let bits = if wide { 64 } else { 32 };
    let (pos, len) = (pos & 0xff, len & 0xff);
    let mut out = b;
    for i in 0..len {
        if pos + i >= bits {
            break;
        }
        out = (out & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
    }
    out
}

/// Byte permute, default mode.
/// `bmsk.mode.b32 a, b` (PTX ISA pseudo-code): a mask of `b` bits from bit `a`; `.clamp`
/// takes a position or width of 32 or more as out of range, `.wrap` takes both mod 32.
pub(crate) fn bmsk(clamp: bool, a: u64, b: u64) -> u64 {
    let (a, b) = (a as u32, b as u32);
    let (a1, b1) = (a & 0x1f, b & 0x1f);
    let sum = a1 + b1;
    let mut mask0 = !0u32 << a1;
    let mut mask1 = (!0u32).checked_shl(sum).unwrap_or(0);
    let (pos_over, width_over) = (clamp && a >= 32, clamp && b >= 32);
    if pos_over {
        mask0 = 0;
    }
    if sum >= 32 || pos_over || width_over {
        mask1 = 0;
    } else if b1 == 0 {
        mask1 = !0;
    }
    u64::from(mask0 & !mask1)
}

/// `szext.mode.type a, b`: the low `b` bits of `a`, sign- or zero-extended; 0 bits give 0, and
/// 32 or more give `a` with `.clamp`, `b mod 32` bits with `.wrap`.
pub(crate) fn szext(clamp: bool, signed: bool, a: u64, b: u64) -> u64 {
    let (a, b) = (a as u32, b as u32);
    let b1 = b & 0x1f;
    let too_large = b >= 32 && clamp;
    let mask = if too_large { 0 } else { !0u32 << b1 };
    let sign = !(b1 == 0 || too_large || !signed) && (a >> ((b1.wrapping_sub(1)) & 0x1f)) & 1 != 0;
    u64::from((a & !mask) | if sign { mask } else { 0 })
}

/// `fns.b32 mask, base, offset`: the position of the `offset`-th set bit of `mask` counting
/// up (offset > 0) or down (< 0) from `base`, `base` itself for offset 0 when set; else
/// 0xffffffff.
pub(crate) fn fns(mask: u64, base: u64, offset: u64) -> u64 {
    let (mask, base, offset) = (mask as u32, base as u32 as i64, offset as u32 as i32);
    let set = |pos: i64| (0..32).contains(&pos) && (mask >> pos) & 1 != 0;
    if offset == 0 {
        return if set(base) { base as u64 } else { 0xffff_ffff };
    }
    let (inc, mut count) = (i64::from(offset.signum()), offset.unsigned_abs() - 1);
    let mut pos = base;
    while (0..32).contains(&pos) {
        if set(pos) {
            if count == 0 {
                return pos as u64;
            }
            count -= 1;
        }
        pos += inc;
    }
    0xffff_ffff
}

pub(crate) fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let bytes = (u64::from(b as u32) << 32) | u64::from(a as u32);
    let mut out = 0u64;
    for i in 0..4 {
        let sel = (c >> (4 * i)) & 0xf;
        let byte = (bytes >> ((sel & 7) * 8)) & 0xff;
        let byte = if sel & 8 != 0 {
            if byte & 0x80 != 0 { 0xff } else { 0 }
        } else {
            byte
        };
        out |= byte << (8 * i);
    }
    out
}

/// `testp`: finite, infinite, number, notanumber, normal, subnormal.
pub(crate) fn testp(op: u8, ty: Ty, a: u64) -> bool {
    let x = fget(ty, a, false);
    let sub = match ty {
        Ty::F32 => f32::from_bits(a as u32).is_subnormal(),
        _ => x.is_subnormal(),
    };
    match op {
        0 => x.is_finite(),
        1 => x.is_infinite(),
        2 => !x.is_nan(),
        3 => x.is_nan(),
        4 => x.is_normal() && !sub,
        _ => sub,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_respect_width_and_sign() {
        assert_eq!(ibin(IOp::MulHi, Ty::S32, (-2i32) as u64, 3), u64::MAX);
        assert_eq!(ibin(IOp::MulHi, Ty::U32, 0xffff_ffff, 2) as u32, 1);
        assert_eq!(
            ibin(IOp::MulWide, Ty::S32, (-2i32) as u32 as u64, 3) as i64,
            -6
        );
        assert_eq!(ibin(IOp::Shr, Ty::S32, 0x8000_0000, 40) as u32, 0xffff_ffff);
        assert_eq!(ibin(IOp::Shr, Ty::U32, 0x8000_0000, 40) as u32, 0);
        assert_eq!(ibin(IOp::Shl, Ty::B64, 1, 64), 0);
        assert_eq!(ibin(IOp::Div, Ty::S32, (-7i32) as u64, 2) as i32, -3);
        assert_eq!(ibin(IOp::Rem, Ty::S32, (-7i32) as u64, 2) as i32, -1);
        assert_eq!(ibin(IOp::Div, Ty::U32, 7, 0) as u32, u32::MAX);
        assert_eq!(ibin(IOp::Min, Ty::S32, (-1i32) as u64, 1) as i32, -1);
        assert_eq!(ibin(IOp::Min, Ty::U32, (-1i32) as u64, 1) as u32, 1);
        assert_eq!(
            ibin(IOp::AddSat, Ty::S32, i32::MAX as u64, 5) as i32,
            i32::MAX
        );
        assert_eq!(iun(IUn::Clz, Ty::B32, 1), 31);
        assert_eq!(iun(IUn::Popc, Ty::B64, u64::MAX), 64);
        assert_eq!(iun(IUn::Brev, Ty::B32, 1), 0x8000_0000);
        // The PTX ISA's examples, and the edges of each mode.
        assert_eq!(bmsk(false, 1, 2), 0x6);
        assert_eq!(bmsk(false, 4, 0), 0);
        assert_eq!(bmsk(false, 30, 4), 0xc000_0000);
        assert_eq!(bmsk(true, 32, 1), 0);
        assert_eq!(bmsk(true, 4, 40), 0xffff_fff0);
        assert_eq!(bmsk(false, 36, 2), 0x30);
        assert_eq!(szext(false, false, 0xffff_ffff, 0), 0);
        assert_eq!(szext(false, true, 0x0000_0080, 8), 0xffff_ff80);
        assert_eq!(szext(false, false, 0x0000_0180, 8), 0x80);
        assert_eq!(szext(true, true, 0x1234_5678, 40), 0x1234_5678);
        assert_eq!(szext(false, true, 0x1234_5678, 36), 0xffff_fff8);
        assert_eq!(szext(false, false, 0x1234_5678, 36), 0x8);
        assert_eq!(fns(0xaaaa_aaaa, 3, 1), 3);
        assert_eq!(fns(0xaaaa_aaaa, 3, (-1i32) as u32 as u64), 3);
        assert_eq!(fns(0xaaaa_aaaa, 2, 1), 3);
        assert_eq!(fns(0xaaaa_aaaa, 2, (-1i32) as u32 as u64), 1);
        assert_eq!(fns(0xaaaa_aaaa, 2, 0), 0xffff_ffff);
        assert_eq!(fns(0x1, 5, 2), 0xffff_ffff);
    }

    #[test]
    fn float_compare_handles_unordered() {
        let nan = u64::from(f32::NAN.to_bits());
        let one = u64::from(1f32.to_bits());
        assert!(!compare(Cmp::Lt, Ty::F32, false, nan, one));
        assert!(compare(Cmp::Ltu, Ty::F32, false, nan, one));
        assert!(!compare(Cmp::Ne, Ty::F32, false, nan, one));
        assert!(compare(Cmp::Neu, Ty::F32, false, nan, one));
        assert!(compare(Cmp::Nan, Ty::F32, false, nan, one));
    }

    #[test]
    fn bit_field_ops_match_ptx_definitions() {
        assert_eq!(bfe(Ty::U32, 0xabcd_1234, 8, 8), 0x12);
        assert_eq!(bfe(Ty::S32, 0x0000_8000, 12, 4) as u32, 0xffff_fff8);
        assert_eq!(bfi(false, 0xf, 0, 4, 4), 0xf0);
        assert_eq!(prmt(0x4433_2211, 0x8877_6655, 0x5410), 0x6655_2211);
        assert_eq!(prmt(0x0000_0080, 0, 0x8888), 0xffff_ffff);
    }

    #[test]
    fn funnel_shift_bfind_and_dp4a() {
        assert_eq!(shf(true, true, 0x8000_0000, 0x1, 1), 0x3);
        assert_eq!(shf(false, true, 0x1, 0x1, 1), 0x8000_0000);
        assert_eq!(shf(true, false, 0, 0x1234, 40), 0);
        assert_eq!(bfind(Ty::U32, false, 0x10), 4);
        assert_eq!(bfind(Ty::U32, true, 0x10), 27);
        assert_eq!(bfind(Ty::S32, false, (-1i32) as u64), 0xffff_ffff);
        assert_eq!(bfind(Ty::U32, false, 0), 0xffff_ffff);
        assert_eq!(
            dp4a(true, false, 0xff_02, 0x03_04, 10) as u32,
            (10 + 8 - 3) as u32
        );
    }

    #[test]
    fn carry_chains_propagate() {
        assert_eq!(carry(CarryKind::Add, Ty::U32, 0xffff_ffff, 1, 0, 0), (0, 1));
        assert_eq!(carry(CarryKind::Add, Ty::U32, 1, 2, 0, 1), (4, 0));
        assert_eq!(carry(CarryKind::Sub, Ty::U32, 0, 1, 0, 0), (0xffff_ffff, 1));
        assert_eq!(
            carry(CarryKind::MadHi, Ty::U32, 0xffff_ffff, 2, 5, 1),
            (7, 0)
        );
        assert_eq!(
            carry(CarryKind::MadLo, Ty::U64, u64::MAX, u64::MAX, 0, 0),
            (1, 0)
        );
    }

    #[test]
    fn lane_fma_is_fused() {
        // fma(x, x, -fl(x*x)) is the rounding error of the product: 2^-46, not 0.
        let x = 1.0f32 + f32::EPSILON;
        let a = [u64::from(x.to_bits()); 32];
        let c = [u64::from((-(x * x)).to_bits()); 32];
        let out = fma_f32_lanes(&a, &a, &c);
        assert_eq!(f32::from_bits(out[7] as u32), 2f32.powi(-46));
    }

    #[test]
    fn mul24_mad24_and_sad() {
        assert_eq!(imad(MadKind::Lo24, Ty::U32, 0xff00_0003, 5, 0) as u32, 15);
        assert_eq!(
            imad(MadKind::Lo24, Ty::S32, 0x00ff_ffff, 3, 0) as u32,
            (-3i32) as u32
        );
        assert_eq!(
            imad(MadKind::Hi24, Ty::U32, 0x0080_0000, 0x0080_0000, 1) as u32,
            0x4000_0001
        );
        assert_eq!(
            imad(MadKind::Sad, Ty::S32, (-2i32) as u64, 3, 10) as u32,
            15
        );
        assert_eq!(imad(MadKind::Sad, Ty::U32, 2, 7, 1) as u32, 6);
    }

    #[test]
    fn lop3_truth_tables() {
        let (a, b, c) = (0xf0, 0xcc, 0xaa);
        for lut in [0x80u8, 0xfe, 0x96, 0xe8, 0x00, 0xff] {
            assert_eq!(lop3(a, b, c, lut) & 0xff, u64::from(lut), "{lut:#x}");
        }
    }

    #[test]
    fn f16x2_adds_each_half() {
        let one = u64::from(to_half(1.0, false));
        let two = u64::from(to_half(2.0, false));
        let m = FMods {
            rnd: Rnd::Rn,
            ftz: false,
            sat: false,
        };
        let r = fbin(FOp::Add, Ty::F16x2, m, one | (two << 16), two | (two << 16));
        assert_eq!(
            r,
            u64::from(to_half(3.0, false)) | (u64::from(to_half(4.0, false)) << 16)
        );
    }
}
