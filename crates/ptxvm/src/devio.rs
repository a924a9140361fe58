//! Device-side output: CUDA's `printf` (the `vprintf` the compiler turns it into) and the
//! message of a failed `assert` (`__assertfail`).
//!
//! `vprintf(format, args)` receives a generic pointer to the format string and one to a packed
//! argument buffer: each argument at an offset aligned to its size, integers narrower than 32
//! bits promoted to 32, `float` promoted to `double`, pointers and `%s` strings as 64-bit
//! addresses. [`format`] walks the C format string and reads the buffer the same way.
//!
//! NVIDIA's driver keeps printf records in a fixed-size FIFO (`CU_LIMIT_PRINTF_FIFO_SIZE`) that
//! the host prints at synchronisation points; a record that does not fit is lost. A
//! [`DeviceOutput`] is that FIFO for one launch: each record costs [`record_cost`] bytes of the
//! limit, and the formatted text of those that fit is kept, in the order threads wrote them.

use std::sync::{Mutex, PoisonError};

/// Longest string `%s` or an assert message prints; a longer one is cut (a missing NUL in
/// device memory must not read megabytes).
pub(crate) const MAX_STRING: usize = 4096;

/// Bytes a record takes in the FIFO: a header and the format pointer, then the argument buffer
/// rounded to 8 bytes.
pub fn record_cost(arg_bytes: u64) -> u64 {
    16 + arg_bytes.div_ceil(8) * 8
}

/// The printf FIFO of one launch: a byte budget and the text of the records that fitted.
#[derive(Debug)]
pub struct DeviceOutput {
    limit: u64,
    inner: Mutex<Fifo>,
}

#[derive(Debug, Default)]
struct Fifo {
    used: u64,
    text: Vec<u8>,
    dropped: u64,
}

impl DeviceOutput {
    /// A FIFO of `limit_bytes` (what remains of `CU_LIMIT_PRINTF_FIFO_SIZE`).
    pub fn new(limit_bytes: u64) -> DeviceOutput {
        DeviceOutput {
            limit: limit_bytes,
            inner: Mutex::new(Fifo::default()),
        }
    }

    /// Appends one record's text if its cost still fits; returns whether it did.
    pub(crate) fn push(&self, cost: u64, text: &[u8]) -> bool {
        // A panic cannot leave the FIFO torn: every update is a push and two additions.
        let mut f = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if f.used.saturating_add(cost) > self.limit {
            f.dropped += 1;
            return false;
        }
        f.used += cost;
        f.text.extend_from_slice(text);
        true
    }

    /// The text written, the FIFO bytes it used and how many records did not fit.
    pub fn take(&self) -> (Vec<u8>, u64, u64) {
        let mut f = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let f = std::mem::take(&mut *f);
        (f.text, f.used, f.dropped)
    }
}

/// Reads device memory for the formatter: `bytes(addr, len)` for `len` ≤ 8 (aligned), `string`
/// for a NUL-terminated string. `None` is an address the thread cannot read.
pub(crate) trait DeviceRead {
    fn scalar(&mut self, addr: u64, len: u64) -> Option<u64>;
    fn string(&mut self, addr: u64) -> Option<Vec<u8>>;
}

/// One conversion of a format string, as far as the argument buffer cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    Int { size: u64, signed: bool },
    Float,
    Str,
    Ptr,
}

/// Formats `format` with the argument buffer at `args`; returns the text, the number of
/// arguments consumed (vprintf's return value) and the argument bytes read.
pub(crate) fn format(format: &[u8], args: u64, mem: &mut dyn DeviceRead) -> (Vec<u8>, i32, u64) {
    let mut out = Vec::with_capacity(format.len() + 16);
    let mut off = 0u64;
    let mut count = 0i32;
    let mut i = 0;
    let mut next = |mem: &mut dyn DeviceRead, size: u64| -> Option<u64> {
        off = off.div_ceil(size) * size;
        let v = mem.scalar(args.wrapping_add(off), size);
        off += size;
        v
    };
    while i < format.len() {
        let c = format[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = Spec::default();
        while let Some(&f) = format.get(i) {
            match f {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        if format.get(i) == Some(&b'*') {
            i += 1;
            let w = next(mem, 4).unwrap_or(0) as u32 as i32;
            count += 1;
            spec.left |= w < 0;
            spec.width = w.unsigned_abs() as usize;
        } else {
            spec.width = digits(format, &mut i);
        }
        if format.get(i) == Some(&b'.') {
            i += 1;
            if format.get(i) == Some(&b'*') {
                i += 1;
                let p = next(mem, 4).unwrap_or(0) as u32 as i32;
                count += 1;
                spec.precision = (p >= 0).then_some(p as usize);
            } else {
                spec.precision = Some(digits(format, &mut i));
            }
        }
        let mut long = 0;
        while let Some(&m) = format.get(i) {
            match m {
                b'l' | b'z' | b't' | b'j' | b'q' => long += 1,
                b'h' | b'L' => {}
                _ => break,
            }
            i += 1;
        }
        let Some(&conv) = format.get(i) else {
            out.extend_from_slice(&format[start..]);
            break;
        };
        i += 1;
        let size = if long > 0 { 8 } else { 4 };
        let arg = match conv {
            b'%' => {
                out.push(b'%');
                continue;
            }
            b'd' | b'i' => Arg::Int { size, signed: true },
            b'u' | b'x' | b'X' | b'o' | b'c' => Arg::Int {
                size,
                signed: false,
            },
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => Arg::Float,
            b's' => Arg::Str,
            b'p' => Arg::Ptr,
            _ => {
                // Not a conversion C defines: printed as written, no argument consumed.
                out.extend_from_slice(&format[start..i]);
                continue;
            }
        };
        let raw = next(
            mem,
            if matches!(arg, Arg::Int { size: 4, .. }) {
                4
            } else {
                8
            },
        );
        count += 1;
        let Some(raw) = raw else {
            out.extend_from_slice(b"<bad argument>");
            continue;
        };
        let body = match arg {
            Arg::Int { size, signed } => {
                let v = if size == 4 { raw & 0xffff_ffff } else { raw };
                if conv == b'c' {
                    spec.pad(&mut out, &[v as u8], false);
                    continue;
                }
                spec.int(conv, v, signed && size == 4, signed && size == 8)
            }
            Arg::Float => spec.float(conv, f64::from_bits(raw)),
            Arg::Ptr => {
                let mut p = b"0x".to_vec();
                p.extend(spec.int(b'x', raw, false, false));
                p
            }
            Arg::Str => {
                let mut s = if raw == 0 {
                    b"(null)".to_vec()
                } else {
                    mem.string(raw).unwrap_or_else(|| b"<bad string>".to_vec())
                };
                if let Some(p) = spec.precision {
                    s.truncate(p);
                }
                spec.pad(&mut out, &s, false);
                continue;
            }
        };
        let numeric = !matches!(arg, Arg::Ptr);
        spec.pad(&mut out, &body, numeric);
    }
    (out, count, off)
}

fn digits(s: &[u8], i: &mut usize) -> usize {
    let mut n = 0usize;
    while let Some(d) = s.get(*i).filter(|d| d.is_ascii_digit()) {
        n = n
            .saturating_mul(10)
            .saturating_add(usize::from(d - b'0'))
            .min(1 << 16);
        *i += 1;
    }
    n
}

/// Flags, width and precision of one conversion.
#[derive(Debug, Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

impl Spec {
    /// Pads `body` to the width; zero padding goes after the sign or `0x` prefix.
    fn pad(&self, out: &mut Vec<u8>, body: &[u8], numeric: bool) {
        let fill = self.width.saturating_sub(body.len());
        if self.left {
            out.extend_from_slice(body);
            out.extend(std::iter::repeat_n(b' ', fill));
        } else if self.zero
            && numeric
            && self
                .precision
                .is_none_or(|_| body.iter().any(|b| *b == b'.' || *b == b'e'))
        {
            let sign = body
                .iter()
                .take_while(|b| matches!(b, b'-' | b'+' | b' '))
                .count();
            let prefix = if body[sign..].starts_with(b"0x") || body[sign..].starts_with(b"0X") {
                2
            } else {
                0
            };
            let (head, tail) = body.split_at(sign + prefix);
            out.extend_from_slice(head);
            out.extend(std::iter::repeat_n(b'0', fill));
            out.extend_from_slice(tail);
        } else {
            out.extend(std::iter::repeat_n(b' ', fill));
            out.extend_from_slice(body);
        }
    }

    fn sign(&self, negative: bool) -> &'static str {
        match (negative, self.plus, self.space) {
            (true, ..) => "-",
            (false, true, _) => "+",
            (false, false, true) => " ",
            _ => "",
        }
    }

    /// An integer conversion; `neg32`/`neg64` say the value is a signed int/long.
    fn int(&self, conv: u8, raw: u64, neg32: bool, neg64: bool) -> Vec<u8> {
        let (negative, magnitude) = if neg32 {
            let v = raw as u32 as i32;
            (v < 0, u64::from(v.unsigned_abs()))
        } else if neg64 {
            let v = raw as i64;
            (v < 0, v.unsigned_abs())
        } else {
            (false, raw)
        };
        let mut digits = match conv {
            b'x' => format!("{magnitude:x}"),
            b'X' => format!("{magnitude:X}"),
            b'o' => format!("{magnitude:o}"),
            _ => format!("{magnitude}"),
        };
        if let Some(p) = self.precision {
            if p == 0 && magnitude == 0 {
                digits.clear();
            } else if digits.len() < p {
                digits = format!("{}{digits}", "0".repeat(p - digits.len()));
            }
        }
        let prefix = match conv {
            b'x' if self.alt && magnitude != 0 => "0x",
            b'X' if self.alt && magnitude != 0 => "0X",
            b'o' if self.alt && !digits.starts_with('0') => "0",
            _ => "",
        };
        let sign = if matches!(conv, b'd' | b'i') {
            self.sign(negative)
        } else {
            ""
        };
        format!("{sign}{prefix}{digits}").into_bytes()
    }

    /// A floating-point conversion, as C's printf writes it.
    fn float(&self, conv: u8, v: f64) -> Vec<u8> {
        let upper = conv.is_ascii_uppercase();
        let sign = self.sign(v.is_sign_negative() && !v.is_nan());
        let a = v.abs();
        let text = if v.is_nan() {
            "nan".to_owned()
        } else if a.is_infinite() {
            "inf".to_owned()
        } else {
            let p = self.precision.unwrap_or(6);
            match conv.to_ascii_lowercase() {
                b'f' => fixed(a, p, self.alt),
                b'e' => exp(a, p, self.alt),
                b'a' => format!("{a:e}"),
                _ => general(a, p, self.alt),
            }
        };
        let text = if upper { text.to_uppercase() } else { text };
        format!("{sign}{text}").into_bytes()
    }
}

fn fixed(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$}");
    if alt && p == 0 { s + "." } else { s }
}

fn exp(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$e}");
    let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let dot = if alt && p == 0 { "." } else { "" };
    let esign = if e < 0 { '-' } else { '+' };
    format!("{mantissa}{dot}e{esign}{:02}", e.unsigned_abs())
}

/// `%g`: `%e` when the exponent is below -4 or at least the precision, else `%f`; trailing
/// zeros removed unless `#`.
fn general(a: f64, p: usize, alt: bool) -> String {
    let p = p.max(1);
    let x = if a == 0.0 {
        0
    } else {
        let s = format!("{a:.prec$e}", prec = p - 1);
        s.split_once('e')
            .and_then(|(_, e)| e.parse::<i32>().ok())
            .unwrap_or(0)
    };
    let s = if x < -4 || x >= p as i32 {
        exp(a, p - 1, alt)
    } else {
        fixed(a, (p as i32 - 1 - x).max(0) as usize, alt)
    };
    if alt {
        return s;
    }
    let (mantissa, tail) = match s.find('e') {
        Some(k) => s.split_at(k),
        None => (s.as_str(), ""),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!("{mantissa}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Device memory for the tests: a little-endian argument buffer at 0x1000 and strings.
    struct Fake {
        args: Vec<u8>,
        strings: Vec<(u64, &'static [u8])>,
    }

    impl DeviceRead for Fake {
        fn scalar(&mut self, addr: u64, len: u64) -> Option<u64> {
            let off = usize::try_from(addr.checked_sub(0x1000)?).ok()?;
            let bytes = self.args.get(off..off + len as usize)?;
            let mut b = [0u8; 8];
            b[..bytes.len()].copy_from_slice(bytes);
            Some(u64::from_le_bytes(b))
        }
        fn string(&mut self, addr: u64) -> Option<Vec<u8>> {
            self.strings
                .iter()
                .find(|(a, _)| *a == addr)
                .map(|(_, s)| s.to_vec())
        }
    }

    fn run(fmt: &str, args: &[&[u8]]) -> (String, i32) {
        let mut buf = Vec::new();
        for a in args {
            while buf.len() % a.len() != 0 {
                buf.push(0);
            }
            buf.extend_from_slice(a);
        }
        let mut mem = Fake {
            args: buf,
            strings: vec![(0x9000, b"str")],
        };
        let (text, n, _) = format(fmt.as_bytes(), 0x1000, &mut mem);
        (String::from_utf8(text).unwrap(), n)
    }

    #[test]
    fn integers_floats_strings_and_chars_format_as_c_does() {
        let (s, n) = run(
            "%d|%5d|%-4d|%05d|%u|%x|%#X|%lld|%c|%s|%%",
            &[
                &(-7i32).to_le_bytes(),
                &42i32.to_le_bytes(),
                &3i32.to_le_bytes(),
                &(-12i32).to_le_bytes(),
                &u32::MAX.to_le_bytes(),
                &255u32.to_le_bytes(),
                &255u32.to_le_bytes(),
                &(-5i64 << 33).to_le_bytes(),
                &65i32.to_le_bytes(),
                &0x9000u64.to_le_bytes(),
            ],
        );
        assert_eq!(
            s,
            "-7|   42|3   |-0012|4294967295|ff|0XFF|-42949672960|A|str|%"
        );
        assert_eq!(n, 10);
    }

    #[test]
    fn floats_follow_c_rules_for_f_e_and_g() {
        let f = |fmt: &str, v: f64| run(fmt, &[&v.to_bits().to_le_bytes()]).0;
        assert_eq!(f("%f", 1.5), "1.500000");
        assert_eq!(f("%.3f", -2.0), "-2.000");
        assert_eq!(f("%e", 12345.678), "1.234568e+04");
        assert_eq!(f("%E", 0.00012), "1.200000E-04");
        assert_eq!(f("%g", 0.0001), "0.0001");
        assert_eq!(f("%g", 1e-5), "1e-05");
        assert_eq!(f("%g", 123456789.0), "1.23457e+08");
        assert_eq!(f("%g", 100.0), "100");
        assert_eq!(f("%8.2f", 1.23456), "    1.23");
        assert_eq!(f("%+.1f", 2.0), "+2.0");
        assert_eq!(f("%f", f64::INFINITY), "inf");
    }

    #[test]
    fn unreadable_arguments_and_strings_say_so_instead_of_faulting() {
        let (s, n) = run("%d %s", &[]);
        assert_eq!(s, "<bad argument> <bad argument>");
        assert_eq!(n, 2);
        let (s, _) = run("%s", &[&0x7777u64.to_le_bytes()]);
        assert_eq!(s, "<bad string>");
    }

    #[test]
    fn fifo_keeps_the_records_that_fit_and_drops_later_ones() {
        let out = DeviceOutput::new(record_cost(8) * 2);
        assert!(out.push(record_cost(8), b"a\n"));
        assert!(out.push(record_cost(8), b"b\n"));
        assert!(!out.push(record_cost(8), b"c\n"));
        let (text, used, dropped) = out.take();
        assert_eq!((text.as_slice(), used, dropped), (&b"a\nb\n"[..], 48, 1));
    }
}
