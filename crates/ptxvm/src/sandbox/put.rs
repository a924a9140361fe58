//! Appending short names to the rewritten text without a call to `memcpy`.
//!
//! Printing is mostly names of a few bytes (registers, labels, modifiers) pushed one after
//! another. A push of a length known only at run time is a call to libc's `memcpy`, which for
//! such a name costs more than the copy itself: about 700k of them per rewrite of the nvcc
//! corpus 22 times, some 11M instructions in `memcpy` alone (issue #9's profile). [`put`] copies
//! up to 16 bytes with two overlapping loads and stores instead.

/// Appends `s` to `out`, as `out.push_str(s)` does.
#[inline(always)]
pub(crate) fn put(out: &mut String, s: &str) {
    let n = s.len();
    if n > 16 {
        out.push_str(s);
        return;
    }
    out.reserve(n);
    let len = out.len();
    let src = s.as_ptr();
    // SAFETY: `reserve` made room for `n` more bytes after `len`, so every store below lands
    // in the allocation (each covers bytes `len..len + n` only: the two pieces overlap rather
    // than run past `n`), and every load reads bytes `0..n` of `s`. The bytes written are all
    // of `s`, which is UTF-8, appended whole after UTF-8 text: `out` stays valid UTF-8 when its
    // length then takes them in.
    unsafe {
        let v = out.as_mut_vec();
        let dst = v.as_mut_ptr().add(len);
        if n >= 8 {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(n - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else if n > 0 {
            // 1 to 3 bytes: the first, the middle and the last (some of them the same).
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
        v.set_len(len + n);
    }
}

#[cfg(test)]
mod tests {
    /// Every length up to past the short path, onto text of every length around a growth.
    #[test]
    fn put_appends_what_push_str_appends() {
        let word = "%rd12345678901234567890é";
        for start in 0..20 {
            for n in 0..=word.len() {
                let Some(s) = word.get(..n) else { continue };
                let mut want = "x".repeat(start);
                let mut got = String::with_capacity(start);
                got.push_str(&want);
                want.push_str(s);
                super::put(&mut got, s);
                assert_eq!(got, want, "{start} {n}");
            }
        }
    }
}
