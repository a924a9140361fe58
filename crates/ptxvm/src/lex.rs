//! Lexer: PTX text → tokens with line:col, comments dropped.
//!
//! Directive and modifier words keep their leading dot (`.global`, `.L2::128B`) so the parser can
//! tell `ld` from `.ld`-style modifiers without re-reading the text.

use crate::error::Error;

/// One token kind. Numbers are kept as text-derived values, never re-parsed later.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'a> {
    /// Identifier, register (`%r1`), label (`$L__BB0_2`), or opcode word (borrowed from the
    /// source: lexing allocates nothing per token).
    Ident(&'a str),
    /// `.word` (the text after the dot, which may contain `::`).
    Dot(&'a str),
    /// Integer literal (magnitude; a leading `-` is a separate token).
    Int(u64),
    /// `0fXXXXXXXX` single-precision bit pattern.
    F32Bits(u32),
    /// `0dXXXXXXXXXXXXXXXX` double-precision bit pattern, or a decimal float literal.
    F64Bits(u64),
    /// String literal (only used by `.file` and `.pragma`).
    Str(&'a str),
    /// Single punctuation character.
    Punct(char),
}

/// A token and where it starts: its line, and its byte offset in the text, from which
/// [`Tokens::col`] finds its column when an error needs it (kept per token, the column cost a
/// subtraction per token and a register in the lexer's loop).
#[derive(Debug, Clone)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    pub line: u32,
    pub off: u32,
}

/// Upper bound on input size; keeps a fuzzer from making us allocate without limit.
const MAX_INPUT: usize = 64 << 20;

fn ident_char(c: u8) -> bool {
    IDENT_CHAR[usize::from(c)]
}

/// [`ident_char`] by byte, as a table: the lexer asks it of nearly every byte of the input.
const IDENT_CHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        c += 1;
    }
    t
};

/// What a byte can start, as a table: one load and one jump per token instead of a chain of
/// tests in which punctuation came last.
#[derive(Clone, Copy, PartialEq)]
enum Class {
    /// Space, tab, carriage return, form feed (what `is_ascii_whitespace` accepts but `\n`).
    Blank,
    Newline,
    /// Letter, `_`, `$`.
    Ident,
    /// `%`, which starts a register's name (and so may be followed by a component).
    Percent,
    Dot,
    Digit,
    Quote,
    Slash,
    Punct,
    /// `,`, which a blank nearly always follows.
    Comma,
    /// `;` and `:`, which end a statement or a label: counted per block.
    End,
    Open,
    Close,
    Other,
}

const CLASS: [Class; 256] = {
    let mut t = [Class::Other; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b' ' | b'\t' | b'\r' | 0x0C => Class::Blank,
            b'\n' => Class::Newline,
            b'_' | b'$' => Class::Ident,
            b'%' => Class::Percent,
            b'.' => Class::Dot,
            b'"' => Class::Quote,
            b'/' => Class::Slash,
            b';' | b':' => Class::End,
            b'{' => Class::Open,
            b'}' => Class::Close,
            b',' => Class::Comma,
            b'[' | b']' | b'(' | b')' | b'<' | b'>' | b'+' | b'-' | b'!' | b'@' | b'|' | b'=' => {
                Class::Punct
            }
            _ if b.is_ascii_alphabetic() => Class::Ident,
            _ if b.is_ascii_digit() => Class::Digit,
            _ => Class::Other,
        };
        c += 1;
    }
    t
};

/// [`ident_char`] or `:`, as a table: a modifier's bytes (`.L2::128B`) cost one test each.
const WORD_CHAR: [bool; 256] = {
    let mut t = IDENT_CHAR;
    t[b':' as usize] = true;
    t
};

/// How many of `b`'s leading bytes are identifier characters (or `:`, with `colons`).
fn word_len(b: &[u8], colons: bool) -> usize {
    let table = if colons { &WORD_CHAR } else { &IDENT_CHAR };
    let ends = |c: u8| !table[usize::from(c)];
    // Four bytes a turn: one bounds test for four where the loop below makes one a byte.
    let mut n = 0;
    while let Some(&[a, b1, c, d]) = b.get(n..n + 4) {
        if ends(a) {
            return n;
        }
        if ends(b1) {
            return n + 1;
        }
        if ends(c) {
            return n + 2;
        }
        if ends(d) {
            return n + 3;
        }
        n += 4;
    }
    n + b[n..].iter().position(|&c| ends(c)).unwrap_or(b.len() - n)
}

/// Where the run of word bytes (of [`IDENT_CHAR`], or [`WORD_CHAR`] with `colons`) that starts
/// at `b[from]` ends, and `b[start..]` up to there as text (`start <= from`): the scan of nearly
/// every token, so without a bounds test per byte where the text is `fenced` (`lex`).
#[inline(always)]
fn word(b: &[u8], start: usize, from: usize, colons: bool, fenced: bool) -> (usize, &str) {
    if !fenced {
        let end = from + word_len(&b[from..], colons);
        return (end, ascii(b, start, end));
    }
    let table = if colons { &WORD_CHAR } else { &IDENT_CHAR };
    let mut end = from;
    // SAFETY: in a fenced text the last byte is neither a word byte nor `%`. Every caller's
    // `b[from - 1]` is a word byte or `%` (an identifier, a register), or its `b[from]` is a word
    // byte (a modifier after its `.`): either is a byte before the last, so `from < b.len()`,
    // and the run stops at the last byte at the latest. Every byte read is in `b`.
    while table[usize::from(unsafe { *b.get_unchecked(end) })] {
        end += 1;
    }
    debug_assert!(start <= end && end < b.len());
    debug_assert!(b[start..end].is_ascii());
    // SAFETY: `start <= from <= end < b.len()` (above), and the run's bytes are ASCII: the
    // tables are true for ASCII bytes only, and what lies between `start` and `from` is `%` or
    // `.` or a word byte. ASCII is valid UTF-8.
    let text = unsafe { std::str::from_utf8_unchecked(b.get_unchecked(start..end)) };
    (end, text)
}

/// `b[start..end]` as text, for a run of bytes the lexer took by [`IDENT_CHAR`] or
/// [`WORD_CHAR`] (with a leading `%` and a trailing component such as `.x`): without `str`
/// slicing's two char-boundary tests, which were about a tenth of the lexer's instructions.
fn ascii(b: &[u8], start: usize, end: usize) -> &str {
    let run = &b[start..end];
    debug_assert!(run.is_ascii());
    // SAFETY: the tables are true for ASCII bytes only, and `%`, `.` and `x`/`y`/`z`/`w` are
    // ASCII, so every byte of `run` is ASCII, which is valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(run) }
}

/// Where the run of blanks at `b[i..]` ends.
#[inline]
fn past_blanks(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| is_blank(c)) {
        i += 1;
    }
    i
}

fn is_blank(c: u8) -> bool {
    CLASS[usize::from(c)] == Class::Blank
}

/// A module's tokens, with what the parser wants to know about its blocks ahead of parsing
/// them. Reads as the token slice.
#[derive(Debug, Default)]
pub(crate) struct Tokens<'a> {
    src: &'a str,
    toks: Vec<Token<'a>>,
    /// For each `{` in order: its token index, and how many `;` and `:` lie between it and its
    /// matching `}` (to the end, when unmatched), which bounds the statements of the block.
    blocks: Vec<(u32, u32)>,
}

impl<'a> std::ops::Deref for Tokens<'a> {
    type Target = [Token<'a>];
    fn deref(&self) -> &[Token<'a>] {
        &self.toks
    }
}

impl Tokens<'_> {
    /// The 1-based column of `t`, in bytes from the start of its line, as the lexer counts it.
    pub(crate) fn col(&self, t: &Token<'_>) -> u32 {
        col_at(self.src.as_bytes(), t.off as usize)
    }

    /// The `;`/`:` count of the `{` at token `at`, looking from `blocks[*from..]` and leaving
    /// `*from` there: blocks are asked for in token order, so a cursor finds each in one step.
    pub(crate) fn block_ends(&self, at: usize, from: &mut usize) -> Option<u32> {
        while let Some(&(open, n)) = self.blocks.get(*from) {
            match (open as usize).cmp(&at) {
                std::cmp::Ordering::Less => *from += 1,
                std::cmp::Ordering::Equal => return Some(n),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

/// What [`Tokens::blocks`] is built from while lexing. Its work is out of line: braces are
/// rare, and the main loop has no registers to spare for it.
#[derive(Default)]
struct Blocks {
    blocks: Vec<(u32, u32)>,
    /// Open blocks, innermost last: each one's index in `blocks` and `ends` when it opened.
    open: Vec<(usize, u32)>,
    /// `;` and `:` so far.
    ends: u32,
}

impl Blocks {
    #[inline(never)]
    fn open(&mut self, token: usize) {
        self.open.push((self.blocks.len(), self.ends));
        self.blocks.push((token as u32, 0));
    }
    #[inline(never)]
    fn close(&mut self) {
        if let Some((k, at)) = self.open.pop()
            && let Some(b) = self.blocks.get_mut(k)
        {
            b.1 = self.ends - at;
        }
    }
    /// The blocks, those left open running to the end of the text.
    fn finish(mut self) -> Vec<(u32, u32)> {
        for (k, at) in self.open {
            if let Some(b) = self.blocks.get_mut(k) {
                b.1 = self.ends - at;
            }
        }
        self.blocks
    }
}

/// Splits PTX text into tokens.
pub(crate) fn lex(src: &str) -> Result<Tokens<'_>, Error> {
    if src.len() > MAX_INPUT {
        return Err(Error::TooLarge { bytes: src.len() });
    }
    // Whether the text's last byte ends every word (neither a word byte nor `%`, which starts
    // one): PTX ends in a newline or `}`. Then no scan of a word can run past the text
    // (`word`). A loop of its own for each case: asked per word, it was a load and a branch
    // per token.
    let fenced = src
        .as_bytes()
        .last()
        .is_some_and(|&c| !WORD_CHAR[usize::from(c)] && c != b'%');
    if fenced {
        lex_in::<true>(src)
    } else {
        lex_in::<false>(src)
    }
}

/// [`lex`], for a text that is `FENCED` or not.
fn lex_in<const FENCED: bool>(src: &str) -> Result<Tokens<'_>, Error> {
    let fenced = FENCED;
    let b = src.as_bytes();
    // PTX averages a token every three to four bytes: one allocation, rarely a regrowth.
    let mut out = Vec::with_capacity(src.len() / 3 + 16);
    let mut blocks = Blocks::default();
    let (mut i, mut line) = (0usize, 1u32);
    while let Some(&c) = b.get(i) {
        let start = i;
        let col = || col_at(b, start);
        // Each kind pushes its own token: merged into one push after the match, every kind's
        // token went through the stack.
        macro_rules! token {
            ($tok:expr) => {
                token!(start, $tok)
            };
            ($at:expr, $tok:expr) => {{
                let tok = $tok;
                out.push(Token {
                    tok,
                    line,
                    off: $at as u32,
                })
            }};
        }
        // The register at `b[i]` (a `%`), with its component if it has one.
        macro_rules! register {
            () => {{
                let at = i;
                let (end, mut text) = word(b, at, i + 1, false, fenced);
                i = end;
                // A special register's component (`%tid.x`) stays part of its name, as the
                // parser would join it: one borrowed token, where joining two made a string
                // per name.
                if b.get(i) == Some(&b'.')
                    && matches!(b.get(i + 1), Some(b'x' | b'y' | b'z' | b'w'))
                    && !b
                        .get(i + 2)
                        .is_some_and(|&n| ident_char(n) || n == b':' || n == b'.')
                {
                    i += 2;
                    text = ascii(b, at, i);
                }
                token!(at, Tok::Ident(text));
            }};
        }
        // Registers and the commas between them (`%r1, %r2, %r3`), from `b[i]`, as the
        // `Percent` and `Comma` arms would lex them: here rather than a turn of the loop each,
        // whose class dispatch (an indirect jump, which the predictor often missed) was the
        // larger part of the lexer's time.
        macro_rules! registers {
            () => {
                while b.get(i) == Some(&b'%') {
                    register!();
                    if b.get(i) != Some(&b',') {
                        break;
                    }
                    token!(i, Tok::Punct(','));
                    i += 1;
                    if b.get(i).is_some_and(|&c| is_blank(c)) {
                        i += 1;
                    }
                }
            };
        }
        // The identifier at `b[i]` (an opcode, most of them), then its modifiers
        // (`ld.global.f32`), the blanks after them and its first registers, as the `Dot`,
        // `Blank`, `Percent` and `Comma` arms would lex them, without a turn of the loop each
        // (see `registers`).
        macro_rules! ident {
            () => {{
                let at = i;
                let (end, text) = word(b, at, i + 1, false, fenced);
                i = end;
                token!(at, Tok::Ident(text));
                while b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(|&n| ident_char(n)) {
                    let at = i;
                    let (end, text) = word(b, at + 1, at + 1, true, fenced);
                    i = end;
                    token!(at, Tok::Dot(text));
                }
                if b.get(i).is_some_and(|&c| is_blank(c)) {
                    i = past_blanks(b, i + 1);
                }
                registers!();
            }};
        }
        match CLASS[usize::from(c)] {
            Class::Blank => {
                // A run of blanks (`mov.u32 \t%r1`) in one turn.
                i = past_blanks(b, i + 1);
            }
            Class::Newline => {
                line += 1;
                // A line's indentation skipped here: a turn of the loop per blank cost more.
                i = past_blanks(b, i + 1);
            }
            Class::Ident => ident!(),
            Class::Percent => registers!(),
            Class::Punct => {
                i += 1;
                token!(Tok::Punct(c as char));
            }
            Class::Comma => {
                i += 1;
                token!(Tok::Punct(','));
                // The blank after it skipped here: a turn of the loop cost more.
                if b.get(i).is_some_and(|&c| is_blank(c)) {
                    i += 1;
                }
                registers!();
            }
            Class::End => {
                i += 1;
                blocks.ends += 1;
                token!(Tok::Punct(c as char));
                // Most lines end here: their newline and the next line's indentation skipped
                // with the `;` or label's `:`, a turn of the loop fewer a line.
                if b.get(i) == Some(&b'\n') {
                    line += 1;
                    i = past_blanks(b, i + 1);
                    // The next line's opcode or label, most often.
                    if b.get(i)
                        .is_some_and(|&c| CLASS[usize::from(c)] == Class::Ident)
                    {
                        ident!();
                    }
                }
            }
            Class::Open => {
                i += 1;
                blocks.open(out.len());
                token!(Tok::Punct('{'));
            }
            Class::Close => {
                i += 1;
                blocks.close();
                token!(Tok::Punct('}'));
            }
            Class::Dot if b.get(i + 1).is_some_and(|&n| ident_char(n)) => {
                let (end, text) = word(b, start + 1, i + 1, true, fenced);
                i = end;
                token!(Tok::Dot(text));
            }
            Class::Digit => {
                let Some((t, n)) = lex_number(&b[i..]) else {
                    return Err(fail(line, col(), "malformed number".into()));
                };
                i += n;
                token!(t);
            }
            Class::Slash if b.get(i + 1) == Some(&b'/') => i = line_end(b, i + 2),
            Class::Slash if b.get(i + 1) == Some(&b'*') => {
                let Some(end) = block_comment(b, i, &mut line) else {
                    return Err(fail(line, col(), "unterminated /* comment".into()));
                };
                i = end;
            }
            Class::Quote => {
                let Some(end) = string_end(b, i) else {
                    return Err(fail(line, col(), "unterminated string literal".into()));
                };
                i = end + 1;
                token!(Tok::Str(&src[start + 1..end]));
            }
            Class::Dot | Class::Slash | Class::Other => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(fail(line, col(), format!("unexpected character {ch:?}")));
            }
        }
    }
    Ok(Tokens {
        src,
        toks: out,
        blocks: blocks.finish(),
    })
}

/// The end of the `/* */` comment at `b[i..]` (just past its `*/`), counting the lines it
/// spans into `line`; `None` when it is not closed (which leaves `line` as it was, for the
/// error's position).
#[inline(never)]
fn block_comment(b: &[u8], mut i: usize, line: &mut u32) -> Option<usize> {
    let mut l = *line;
    i += 2;
    loop {
        if i + 1 >= b.len() {
            return None;
        }
        if b[i] == b'*' && b[i + 1] == b'/' {
            *line = l;
            return Some(i + 2);
        }
        if b[i] == b'\n' {
            l += 1;
        }
        i += 1;
    }
}

/// Where the string literal opened at `b[i]` closes (its `"`), if it does on its line.
#[inline(never)]
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let n = b[i + 1..].iter().position(|&c| c == b'"' || c == b'\n')?;
    (b[i + 1 + n] == b'"').then_some(i + 1 + n)
}

/// Where the line that `b[from..]` is in ends: its newline's index, or `b.len()`. Eight bytes a
/// turn: nvcc's header comments are a few hundred bytes per module, a turn per byte.
fn line_end(b: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut at = from.min(b.len());
    for c in b[at..].chunks_exact(8) {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ NEWLINES;
        // Nonzero iff some byte of `w` is zero, i.e. some byte was a newline.
        if w.wrapping_sub(ONES) & !w & HIGHS != 0 {
            break;
        }
        at += 8;
    }
    at + b[at..]
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(b.len() - at)
}

/// The 1-based column of byte `at` of `b`, in bytes from the start of its line.
fn col_at(b: &[u8], at: usize) -> u32 {
    let at = at.min(b.len());
    let line_start = b[..at]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    (at - line_start + 1) as u32
}

/// A lexing error at `line`:`col`, built out of line.
#[cold]
#[inline(never)]
fn fail(line: u32, col: u32, msg: String) -> Error {
    Error::Parse { line, col, msg }
}

/// Lexes a number at the start of `b`; returns the token and the bytes consumed.
#[inline(never)]
fn lex_number(b: &[u8]) -> Option<(Tok<'static>, usize)> {
    // Most numbers are short plain decimals (offsets, widths, counts): summed as scanned, where
    // the general path below checked UTF-8, trimmed suffixes and parsed the text again.
    let (mut digits, mut v) = (0, 0u64);
    while let Some(&c) = b.get(digits)
        && c.is_ascii_digit()
    {
        // Wraps only past 19 digits, where `v` goes unused.
        v = v.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
        digits += 1;
    }
    let ends = !b
        .get(digits)
        .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_');
    if ends && digits <= 19 && (digits == 1 || b[0] != b'0') {
        return Some((Tok::Int(v), digits));
    }
    // Float bit patterns (`0f3F800000`), nvcc's spelling of every float constant: summed as
    // scanned too. Only where the general path below reads the same text (the digits end the
    // number, no sign follows): anything else is left to it.
    if let [b'0', p, rest @ ..] = b
        && let w @ (8 | 16) = match p | 0x20 {
            b'f' => 8,
            b'd' => 16,
            _ => 0,
        }
        && let Some(h) = rest.get(..w)
        && !rest
            .get(w)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'+' | b'-'))
        && let Some(v) = h.iter().try_fold(0u64, |v, &c| {
            Some(v << 4 | u64::from((c as char).to_digit(16)?))
        })
    {
        let tok = if w == 8 {
            Tok::F32Bits(v as u32)
        } else {
            Tok::F64Bits(v)
        };
        return Some((tok, 2 + w));
    }
    let mut n = 0;
    while n < b.len() && (b[n].is_ascii_alphanumeric() || b[n] == b'.' || b[n] == b'_') {
        // A sign directly after an exponent belongs to the number (1.5e-3).
        n += 1;
        if n < b.len()
            && (b[n] == b'-' || b[n] == b'+')
            && (b[n - 1] == b'e' || b[n - 1] == b'E')
            && !b.starts_with(b"0x")
            && !b.starts_with(b"0X")
        {
            n += 1;
        }
    }
    let text = std::str::from_utf8(&b[..n]).ok()?;
    // Letters compared without regard to case, in place: lowering a copy cost an allocation
    // per number.
    let after = |p: &str| {
        text.get(..p.len())
            .filter(|h| h.eq_ignore_ascii_case(p))
            .and_then(|_| text.get(p.len()..))
    };
    fn unsuffixed(h: &str) -> &str {
        h.trim_end_matches(['u', 'U'])
    }
    let tok = if let Some(h) = after("0f").filter(|h| h.len() == 8) {
        Tok::F32Bits(u32::from_str_radix(h, 16).ok()?)
    } else if let Some(h) = after("0d").filter(|h| h.len() == 16) {
        Tok::F64Bits(u64::from_str_radix(h, 16).ok()?)
    } else if let Some(h) = after("0x") {
        Tok::Int(u64::from_str_radix(unsuffixed(h), 16).ok()?)
    } else if let Some(h) = after("0b") {
        Tok::Int(u64::from_str_radix(unsuffixed(h), 2).ok()?)
    } else if text.contains(['.', 'e', 'E']) {
        Tok::F64Bits(text.parse::<f64>().ok()?.to_bits())
    } else {
        let d = unsuffixed(text);
        if d.len() > 1 && d.starts_with('0') {
            Tok::Int(u64::from_str_radix(&d[1..], 8).ok()?)
        } else {
            Tok::Int(d.parse::<u64>().ok()?)
        }
    };
    Some((tok, n))
}

#[cfg(test)]
mod tests;
