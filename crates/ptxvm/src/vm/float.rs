//! Floating-point helpers the host FPU does not give directly: half/bfloat16 conversion, IEEE
//! directed rounding (from a value plus its exact residual), flush-to-zero and saturation.

use crate::ir::Rnd;

/// f64 → IEEE binary16 (`bf == false`) or bfloat16 bits, round to nearest even.
pub(crate) fn to_half(x: f64, bf: bool) -> u16 {
    if bf {
        // bfloat16 is the top half of an f32; round the f32 once, then its low 16 bits.
        let f = x as f32;
        let b = f.to_bits();
        if f.is_nan() {
            return ((b >> 16) as u16) | 0x40;
        }
        let lsb = (b >> 16) & 1;
        return ((b.wrapping_add(0x7fff + lsb)) >> 16) as u16;
    }
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    let a = x.abs();
    if a.is_nan() {
        return 0x7e00;
    }
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Scale so the result's least significant bit is 1.0, round with the FPU, rebuild.
    if a < 6.103_515_625e-5 {
        // Subnormal: unit is 2^-24.
        let m = (a * 16_777_216.0).round_ties_even() as u16;
        return sign | m;
    }
    let e = a.log2().floor() as i32;
    let mut e = e.clamp(-14, 15);
    // log2 may be off by one near powers of two.
    if a < 2f64.powi(e) {
        e -= 1;
    } else if a >= 2f64.powi(e + 1) {
        e += 1;
    }
    let m = (a / 2f64.powi(e - 10)).round_ties_even() as u32; // 1024..=2048
    let (m, e) = if m >= 2048 { (m >> 1, e + 1) } else { (m, e) };
    if e > 15 {
        return sign | 0x7c00;
    }
    sign | (((e + 15) as u16) << 10) | (m as u16 & 0x3ff)
}

/// IEEE binary16 or bfloat16 bits → f32 (exact).
pub(crate) fn from_half(h: u16, bf: bool) -> f32 {
    if bf {
        return f32::from_bits(u32::from(h) << 16);
    }
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let e = (h >> 10) & 0x1f;
    let m = f32::from(h & 0x3ff);
    match e {
        0 => sign * m * 2f32.powi(-24),
        31 if m == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f32.powi(i32::from(e) - 15),
    }
}

/// Rounds the exact value `hi + lo` (with `hi` = fl64 of it and `lo` its residual) to f32.
pub(crate) fn round_f32(hi: f64, lo: f64, rnd: Rnd) -> f32 {
    let r = hi as f32;
    if rnd == Rnd::Rn || hi.is_nan() {
        return r;
    }
    let rd = f64::from(r);
    let diff = if rd == hi { lo } else { (hi - rd) + lo };
    if diff == 0.0 {
        return r;
    }
    match rnd {
        Rnd::Rz if r != 0.0 && (diff < 0.0) != (r < 0.0) => {
            if r > 0.0 {
                r.next_down()
            } else {
                r.next_up()
            }
        }
        Rnd::Rm if diff < 0.0 => r.next_down(),
        Rnd::Rp if diff > 0.0 => r.next_up(),
        _ => r,
    }
}

/// Rounds `hi + lo` to f64 in direction `rnd`, where `hi` is the nearest double and `lo` the
/// (tiny) residual.
pub(crate) fn round_f64(hi: f64, lo: f64, rnd: Rnd) -> f64 {
    if lo == 0.0 || hi.is_nan() {
        return hi;
    }
    match rnd {
        Rnd::Rn => hi,
        Rnd::Rz if (lo < 0.0) != (hi < 0.0) => {
            if hi > 0.0 {
                hi.next_down()
            } else {
                hi.next_up()
            }
        }
        Rnd::Rm if lo < 0.0 => hi.next_down(),
        Rnd::Rp if lo > 0.0 => hi.next_up(),
        _ => hi,
    }
}

/// Sum with exact residual (Knuth's TwoSum).
pub(crate) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, if e.is_finite() { e } else { 0.0 })
}

/// Product with exact residual.
pub(crate) fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    let e = a.mul_add(b, -p);
    (p, if e.is_finite() { e } else { 0.0 })
}

/// Flushes an f32 subnormal to a zero of the same sign.
#[inline(always)]
pub(crate) fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// Clamps to [0, 1], NaN → 0 (`.sat`).
#[inline(always)]
pub(crate) fn sat(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_round_trips_every_finite_value() {
        for h in 0..=0xffffu16 {
            let f = from_half(h, false);
            if f.is_nan() {
                continue;
            }
            assert_eq!(to_half(f64::from(f), false), h, "{h:#x} {f}");
        }
    }

    #[test]
    fn half_rounds_to_nearest_even_and_overflows_to_inf() {
        assert_eq!(to_half(1.0 + 2f64.powi(-11), false), 0x3c00); // tie → even
        assert_eq!(to_half(1.0 + 3.0 * 2f64.powi(-11), false), 0x3c02);
        assert_eq!(to_half(70000.0, false), 0x7c00);
        assert_eq!(to_half(-65504.0, false), 0xfbff);
        assert_eq!(to_half(1e-9, false), 0);
    }

    #[test]
    fn bfloat16_rounds_and_extends() {
        assert_eq!(to_half(1.0, true), 0x3f80);
        assert_eq!(from_half(0x3f80, true), 1.0);
        assert_eq!(
            to_half(f64::from(f32::from_bits(0x3f80_8000)), true),
            0x3f80
        );
        assert_eq!(
            to_half(f64::from(f32::from_bits(0x3f81_8000)), true),
            0x3f82
        );
    }

    #[test]
    fn directed_rounding_of_one_third() {
        let third = 1.0f64 / 3.0;
        let (lo, hi) = (
            round_f32(third, 0.0, Rnd::Rm),
            round_f32(third, 0.0, Rnd::Rp),
        );
        assert!(lo < hi && hi == lo.next_up());
        assert_eq!(round_f32(third, 0.0, Rnd::Rz), lo);
        assert_eq!(round_f32(-third, 0.0, Rnd::Rz), -lo);
        assert_eq!(round_f32(f64::from(f32::MAX) * 1.5, 0.0, Rnd::Rz), f32::MAX);
        let (s, e) = two_sum(1.0, 1e-30);
        assert_eq!(round_f64(s, e, Rnd::Rp), 1f64.next_up());
        assert_eq!(round_f64(s, e, Rnd::Rm), 1.0);
    }
}
