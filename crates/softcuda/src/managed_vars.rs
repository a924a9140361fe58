//! Managed variables in PTX: `.global .attribute(.managed) .align 4 .u32 counter;`, what nvcc
//! emits for a `__managed__` variable. ptxvm does not take variable attributes, and needs none
//! here: softcuda's device memory is host memory at the same address, so a module global is
//! already reachable from host and kernels alike, which is all "managed" asks of it. So before
//! the text is decoded each `.attribute(.managed)` is blanked (spaces of the same length, so
//! the decoder's line and column numbers stay right), and the names of the variables it marked
//! are kept for `cuLibraryGetManaged`. Any other attribute is left for the decoder to refuse.

use std::borrow::Cow;

/// The most managed variables one module may declare (a guard against hostile PTX; nvcc emits
/// one per `__managed__` variable).
pub(crate) const MAX_MANAGED: usize = 4096;

/// `ptx` with every `.attribute(.managed)` blanked, and the names of the variables they marked
/// (at most [`MAX_MANAGED`]: the rest are blanked but not named). Text without the attribute is
/// returned as is.
pub(crate) fn strip(ptx: &str) -> (Cow<'_, str>, Vec<String>) {
    if !ptx.contains(".attribute") {
        return (Cow::Borrowed(ptx), Vec::new());
    }
    let mut text = ptx.as_bytes().to_vec();
    let mut names = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(b"//") {
            i = find(&text, i, b"\n").map_or(text.len(), |end| end + 1);
        } else if text[i..].starts_with(b"/*") {
            i = find(&text, i + 2, b"*/").map_or(text.len(), |end| end + 2);
        } else if text[i] == b'"' {
            i = find(&text, i + 1, b"\"").map_or(text.len(), |end| end + 1);
        } else if let Some(len) = managed_attribute(&text[i..]) {
            text[i..i + len].fill(b' ');
            if names.len() < MAX_MANAGED
                && let Some(name) = declared_name(&text[i + len..])
            {
                names.push(name);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were replaced by ASCII spaces, so the text is still UTF-8.
    let text = String::from_utf8(text).unwrap_or_else(|_| ptx.to_owned());
    (Cow::Owned(text), names)
}

/// Where `needle` next occurs in `text` at or after `from`.
fn find(text: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    text.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| from + at)
}

/// The length of `.attribute ( .managed )` (any spacing) at the start of `text`, if it is there.
fn managed_attribute(text: &[u8]) -> Option<usize> {
    let mut at = b".attribute".len();
    if !text.starts_with(b".attribute") {
        return None;
    }
    let mut expect = |token: &[u8]| -> Option<()> {
        while text.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        text.get(at..)?
            .starts_with(token)
            .then(|| at += token.len())
    };
    expect(b"(")?;
    expect(b".managed")?;
    expect(b")")?;
    Some(at)
}

/// The name a declaration declares: its last plain word before `;`, `=` or `[`
/// (`.align 4 .u32 counter;` → `counter`, `.b8 arr[32];` → `arr`).
fn declared_name(rest: &[u8]) -> Option<String> {
    let end = rest.iter().position(|b| matches!(b, b';' | b'=' | b'['))?;
    let is_word = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'%' | b'.');
    rest[..end]
        .split(|b| !is_word(b))
        .rfind(|w| !w.is_empty() && !w.starts_with(b".") && !w[0].is_ascii_digit())
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_attributes_are_blanked_in_place_and_their_variables_named() {
        let ptx = ".global .attribute(.managed) .align 4 .u32 counter;\n\
                   .global .attribute( .managed ) .align 4 .b8 arr[32];\n\
                   .global .align 4 .u32 plain = 3;\n";
        let (text, names) = strip(ptx);
        assert_eq!(names, ["counter", "arr"]);
        assert!(!text.contains(".attribute"));
        assert_eq!(text.len(), ptx.len());
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with(".global                      .align 4 .u32 counter;"));
    }

    #[test]
    fn text_without_the_attribute_is_untouched_and_other_attributes_are_left_to_the_decoder() {
        let plain = ".global .u32 x;";
        assert!(matches!(strip(plain), (Cow::Borrowed(t), n) if t == plain && n.is_empty()));
        let other = ".global .attribute(.unified(1, 2)) .u32 y;";
        let (text, names) = strip(other);
        assert_eq!(text, other);
        assert!(names.is_empty());
    }

    #[test]
    fn an_attribute_in_a_comment_or_string_is_not_a_declaration() {
        let ptx = "// .attribute(.managed) .u32 a;\n/* .attribute(.managed) .u32 b; */\n";
        let (text, names) = strip(ptx);
        assert_eq!(text, ptx);
        assert!(names.is_empty());
    }

    #[test]
    fn the_names_kept_are_capped() {
        let one = ".global .attribute(.managed) .u32 v;\n";
        let many = one.repeat(MAX_MANAGED + 3);
        let (text, names) = strip(&many);
        assert_eq!(names.len(), MAX_MANAGED);
        assert!(!text.contains(".attribute"));
    }
}
