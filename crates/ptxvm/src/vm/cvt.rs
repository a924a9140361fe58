//! `cvt` semantics: every integer/float width, rounding mode and saturation PTX defines.

use super::float::{from_half, ftz32, round_f32, round_f64, sat, to_half};
use crate::ir::{Rnd, Ty, norm};

/// Decoded `cvt` modifiers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CvtMods {
    pub rnd: Rnd,
    pub int_rnd: bool,
    pub sat: bool,
    pub ftz: bool,
}

/// Range of an integer type as i128.
fn range(t: Ty) -> (i128, i128) {
    let b = t.bits();
    if t.signed() {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    }
}

fn round_int(x: f64, r: Rnd) -> f64 {
    match r {
        Rnd::Rn => x.round_ties_even(),
        Rnd::Rz => x.trunc(),
        Rnd::Rm => x.floor(),
        Rnd::Rp => x.ceil(),
    }
}

fn read_float(st: Ty, v: u64, ftz: bool) -> f64 {
    match st {
        Ty::F32 => {
            let f = f32::from_bits(v as u32);
            f64::from(if ftz { ftz32(f) } else { f })
        }
        Ty::F16 => f64::from(from_half(v as u16, false)),
        Ty::Bf16 => f64::from(from_half(v as u16, true)),
        _ => f64::from_bits(v),
    }
}

/// Rounds the exact value `hi + lo` to the float type `dt`.
fn write_float(dt: Ty, hi: f64, lo: f64, m: CvtMods) -> u64 {
    let hi = if m.sat { sat(hi) } else { hi };
    match dt {
        Ty::F32 => {
            let f = round_f32(hi, lo, m.rnd);
            u64::from(if m.ftz { ftz32(f) } else { f }.to_bits())
        }
        Ty::F16 => u64::from(to_half(hi, false)),
        Ty::Bf16 => u64::from(to_half(hi, true)),
        _ => round_f64(hi, lo, m.rnd).to_bits(),
    }
}

/// Converts raw register value `v` of type `st` to type `dt`.
pub(crate) fn cvt(dt: Ty, st: Ty, m: CvtMods, v: u64) -> u64 {
    match (dt.is_float(), st.is_float()) {
        (false, false) => {
            let x = if st.signed() {
                i128::from(norm(st, v) as i64)
            } else {
                i128::from(norm(st, v))
            };
            if m.sat {
                let (lo, hi) = range(dt);
                x.clamp(lo, hi) as u64
            } else {
                norm(dt, x as u64)
            }
        }
        (false, true) => {
            let f = read_float(st, v, m.ftz);
            if f.is_nan() {
                return 0;
            }
            // Float-to-integer conversions always saturate in PTX.
            let r = round_int(f, m.rnd);
            let (lo, hi) = range(dt);
            let x = if r <= lo as f64 {
                lo
            } else if r >= hi as f64 {
                hi
            } else {
                r as i128
            };
            norm(dt, x as u64)
        }
        (true, false) => {
            let x = if st.signed() {
                i128::from(norm(st, v) as i64)
            } else {
                i128::from(norm(st, v))
            };
            let hi = x as f64;
            // The residual is exact: |x - hi| < 2^11 fits in an f64.
            let lo = (x - hi as i128) as f64;
            write_float(dt, hi, lo, m)
        }
        (true, true) => {
            let f = read_float(st, v, m.ftz);
            if m.int_rnd {
                return write_float(dt, round_int(f, m.rnd), 0.0, m);
            }
            write_float(dt, f, 0.0, m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rnd: Rnd, int_rnd: bool, sat: bool) -> CvtMods {
        CvtMods {
            rnd,
            int_rnd,
            sat,
            ftz: false,
        }
    }

    #[test]
    fn float_to_int_rounds_and_saturates() {
        let f = |x: f32| u64::from(x.to_bits());
        assert_eq!(
            cvt(Ty::S32, Ty::F32, m(Rnd::Rn, true, false), f(2.5)) as i32,
            2
        );
        assert_eq!(
            cvt(Ty::S32, Ty::F32, m(Rnd::Rz, true, false), f(-2.7)) as i32,
            -2
        );
        assert_eq!(
            cvt(Ty::S32, Ty::F32, m(Rnd::Rm, true, false), f(-2.1)) as i32,
            -3
        );
        assert_eq!(cvt(Ty::U8, Ty::F32, m(Rnd::Rz, true, false), f(300.0)), 255);
        assert_eq!(cvt(Ty::U32, Ty::F32, m(Rnd::Rz, true, false), f(-5.0)), 0);
        assert_eq!(
            cvt(Ty::S32, Ty::F32, m(Rnd::Rz, true, false), f(f32::NAN)),
            0
        );
    }

    #[test]
    fn int_to_int_extends_truncates_and_saturates() {
        let n = m(Rnd::Rz, false, false);
        assert_eq!(cvt(Ty::S64, Ty::S32, n, 0xffff_ffff) as i64, -1);
        assert_eq!(cvt(Ty::U64, Ty::U32, n, 0xffff_ffff), 0xffff_ffff);
        assert_eq!(cvt(Ty::U8, Ty::U32, n, 0x1ff), 0xff);
        assert_eq!(cvt(Ty::S8, Ty::S32, m(Rnd::Rz, false, true), 1000), 127);
    }

    #[test]
    fn int_to_float_and_narrowing_follow_rounding_mode() {
        let big = (1u64 << 24) + 1;
        let rn = cvt(Ty::F32, Ty::U64, m(Rnd::Rn, false, false), big) as u32;
        let rp = cvt(Ty::F32, Ty::U64, m(Rnd::Rp, false, false), big) as u32;
        assert_eq!(f32::from_bits(rn), 16_777_216.0);
        assert_eq!(f32::from_bits(rp), 16_777_218.0);
        let h = cvt(
            Ty::F16,
            Ty::F32,
            m(Rnd::Rn, false, false),
            u64::from(1.5f32.to_bits()),
        );
        assert_eq!(h, 0x3e00);
        let back = cvt(Ty::F32, Ty::F16, m(Rnd::Rn, false, false), 0x3e00) as u32;
        assert_eq!(f32::from_bits(back), 1.5);
        let r = cvt(
            Ty::F32,
            Ty::F32,
            m(Rnd::Rm, true, false),
            u64::from(1.5f32.to_bits()),
        );
        assert_eq!(f32::from_bits(r as u32), 1.0);
    }
}
