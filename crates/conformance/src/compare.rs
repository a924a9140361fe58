//! Output checks against a CPU reference: exact for integers and raw bit patterns, a stated
//! tolerance for floats. NaN never passes, so a poisoned (unwritten) float element always fails.

use std::fmt::Write as _;

/// How close a float result must be: `|got - want| <= abs + rel * |want|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Absolute slack, for results near zero (e.g. sums that cancel).
    pub abs: f64,
    /// Relative slack, for results of any size.
    pub rel: f64,
}

impl Tolerance {
    /// Bit-for-bit equal values only (still NaN-rejecting).
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };

    /// Whether `got` is acceptable for `want`. Equal infinities pass; any NaN fails.
    pub fn accepts(&self, got: f64, want: f64) -> bool {
        if got.is_nan() || want.is_nan() {
            return false;
        }
        if got == want {
            return true;
        }
        if !got.is_finite() || !want.is_finite() {
            return false;
        }
        (got - want).abs() <= self.abs + self.rel * want.abs()
    }
}

/// What one output buffer must hold after the kernel ran.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// u32 elements, equal.
    U32(Vec<u32>),
    /// i32 elements, equal.
    I32(Vec<i32>),
    /// u16 elements (f16/bf16 bit patterns), equal.
    U16(Vec<u16>),
    /// u64 elements (or f64 bit patterns of correctly rounded results), equal.
    U64(Vec<u64>),
    /// f32 elements within a tolerance.
    F32 {
        /// The reference values.
        want: Vec<f32>,
        /// The slack allowed.
        tol: Tolerance,
    },
    /// f64 elements within a tolerance.
    F64 {
        /// The reference values.
        want: Vec<f64>,
        /// The slack allowed.
        tol: Tolerance,
    },
}

impl Expect {
    /// The byte length the output buffer must have.
    pub fn byte_len(&self) -> usize {
        match self {
            Expect::U32(v) => v.len() * 4,
            Expect::I32(v) => v.len() * 4,
            Expect::U16(v) => v.len() * 2,
            Expect::U64(v) => v.len() * 8,
            Expect::F32 { want, .. } => want.len() * 4,
            Expect::F64 { want, .. } => want.len() * 8,
        }
    }

    /// Checks `bytes` (little-endian, as copied back from the device). `Err` carries a report of
    /// the first mismatches and their count.
    pub fn check(&self, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() != self.byte_len() {
            return Err(format!(
                "got {} bytes, expected {}",
                bytes.len(),
                self.byte_len()
            ));
        }
        match self {
            Expect::U32(want) => exact(want, &words::<4, _>(bytes, u32::from_le_bytes)),
            Expect::I32(want) => exact(want, &words::<4, _>(bytes, i32::from_le_bytes)),
            Expect::U16(want) => exact(want, &words::<2, _>(bytes, u16::from_le_bytes)),
            Expect::U64(want) => exact(want, &words::<8, _>(bytes, u64::from_le_bytes)),
            Expect::F32 { want, tol } => {
                let got = words::<4, _>(bytes, f32::from_le_bytes);
                let want: Vec<f64> = want.iter().map(|w| f64::from(*w)).collect();
                close(
                    &want,
                    &got.iter().map(|g| f64::from(*g)).collect::<Vec<_>>(),
                    tol,
                )
            }
            Expect::F64 { want, tol } => {
                close(want, &words::<8, _>(bytes, f64::from_le_bytes), tol)
            }
        }
    }
}

fn words<const N: usize, T>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

fn exact<T: PartialEq + std::fmt::Debug + std::fmt::LowerHex>(
    want: &[T],
    got: &[T],
) -> Result<(), String> {
    report(
        want.len(),
        |i| got[i] != want[i],
        |i| format!("[{i}] got {:#x} want {:#x}", got[i], want[i]),
    )
}

fn close(want: &[f64], got: &[f64], tol: &Tolerance) -> Result<(), String> {
    report(
        want.len(),
        |i| !tol.accepts(got[i], want[i]),
        |i| format!("[{i}] got {:e} want {:e}", got[i], want[i]),
    )
}

fn report(
    len: usize,
    bad: impl Fn(usize) -> bool,
    show: impl Fn(usize) -> String,
) -> Result<(), String> {
    let bad_idx: Vec<usize> = (0..len).filter(|&i| bad(i)).collect();
    if bad_idx.is_empty() {
        return Ok(());
    }
    let mut out = format!("{} of {len} elements wrong; first: ", bad_idx.len());
    for (k, &i) in bad_idx.iter().take(6).enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", show(i));
    }
    Err(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_never_passes_even_against_nan() {
        let loose = Tolerance {
            abs: 1e30,
            rel: 1e30,
        };
        assert!(!loose.accepts(f64::NAN, 1.0));
        assert!(!loose.accepts(1.0, f64::NAN));
        assert!(!loose.accepts(f64::NAN, f64::NAN));
    }

    #[test]
    fn tolerance_accepts_inside_and_rejects_outside() {
        let tol = Tolerance {
            abs: 1e-3,
            rel: 1e-2,
        };
        assert!(tol.accepts(100.9, 100.0));
        assert!(!tol.accepts(101.2, 100.0));
        assert!(tol.accepts(0.0005, 0.0));
        assert!(!tol.accepts(0.002, 0.0));
        assert!(tol.accepts(f64::INFINITY, f64::INFINITY));
        assert!(!tol.accepts(f64::INFINITY, f64::MAX));
    }

    #[test]
    fn exact_check_reports_first_mismatch_and_count() {
        let want = Expect::U32(vec![1, 2, 3]);
        let bytes: Vec<u8> = [1u32, 9, 3].iter().flat_map(|w| w.to_le_bytes()).collect();
        let err = want.check(&bytes).unwrap_err();
        assert!(err.starts_with("1 of 3"), "{err}");
        assert!(err.contains("[1] got 0x9 want 0x2"), "{err}");
    }

    #[test]
    fn poisoned_float_output_fails() {
        let want = Expect::F32 {
            want: vec![0.0; 4],
            tol: Tolerance { abs: 1.0, rel: 1.0 },
        };
        assert!(want.check(&[0xff; 16]).is_err());
        assert!(want.check(&[0x7f; 16]).is_err());
        assert!(want.check(&[0; 16]).is_ok());
    }

    #[test]
    fn wrong_length_is_an_error() {
        assert!(Expect::U16(vec![1, 2]).check(&[0; 3]).is_err());
    }
}
