//! AST → PTX text. Prints a parsed (and possibly rewritten) module so that NVIDIA's JIT and
//! ptxvm both accept it: header directives, linkage, performance directives, declarations and
//! instructions as parsed. Debug info (`.loc`, `.file`, `.section`) and pragmas are dropped.

use std::fmt::Write;

use super::put::put;

use crate::ast::{Func, Init, Inst, Module, Operand, Space, Stmt, Str, VarDecl};

/// A statement of rewritten output: the input's own (printed as is, never copied) or new.
pub(crate) enum O<'m> {
    /// An input instruction passed through unchanged.
    Inst(&'m Inst<'m>),
    /// An input statement (declaration, label, table, block) passed through unchanged.
    Stmt(&'m Stmt<'m>),
    /// Something the rewriter made (boxed: a statement is large, since an instruction keeps
    /// its modifiers and operands inline, and `O`s are moved about often).
    New(Box<Stmt<'m>>),
    /// A `{ }` block of rewritten statements.
    Block(Vec<O<'m>>),
    /// Instructions the rewriter made, already printed (one per line).
    Text(String),
    /// Before a `ret` or `exit`: the fault report (`report::report`), printed once the
    /// function turns its reports on (`Fx::add_reports`), which it knows only at its end.
    Report(std::rc::Rc<std::cell::Cell<bool>>),
    /// What only an entry prints, not its skip copy, which shares the rest of its rewritten
    /// prologue and body (`rewrite::func`): the epoch read at entry, and the compares the entry
    /// defers into its body.
    Kernel(Vec<O<'m>>),
    /// What only the skip copy prints: the statement that closes a block ending in a label
    /// once the copy leaves out the kernel's compare after it.
    Copy(Vec<O<'m>>),
}

impl<'m> O<'m> {
    /// A statement the rewriter made.
    pub(crate) fn new(s: Stmt<'m>) -> Self {
        O::New(Box::new(s))
    }
}

/// Prints a rewritten function: its header (`f`'s, the `hidden` parameters after its own: see
/// `rewrite::Rewritten`) and its statements, which are `start` then `body` (`src`: the module's
/// text, see `spelled`); then, given `copy` (its name), the entry's skip copy, which prints what
/// only it prints (`O::Copy`) and leaves out what only the entry prints (`O::Kernel`). The body
/// is printed once: the copy repeats the entry's text around those statements, and its header
/// is the entry's under its own name.
pub(crate) fn rewritten(
    out: &mut String,
    src: &str,
    (f, hidden): (&Func, &[&str]),
    body: Option<(&[O<'_>], &[O<'_>])>,
    copy: Option<&str>,
) -> Result<(), Error> {
    let head_at = out.len();
    let name = head(out, f, hidden);
    let head_end = out.len();
    // The copy's header: the entry's, copied around the copy's name.
    let copy_head = |out: &mut String, c: &str| {
        out.extend_from_within(head_at..name.start);
        put(out, c);
        out.extend_from_within(name.end..head_end);
    };
    let Some((start, body)) = body else {
        put(out, ";\n");
        if let Some(c) = copy {
            out.push('\n');
            copy_head(out, c);
            put(out, ";\n");
        }
        return Ok(());
    };
    put(out, "\n{\n");
    outs_in(out, src, start, 1, &mut Own::Print { skip_copy: false })?;
    let Some(c) = copy else {
        outs_in(out, src, body, 1, &mut Own::Print { skip_copy: false })?;
        put(out, "}\n");
        return Ok(());
    };
    let from = out.len();
    let mut own = Vec::new();
    outs_in(out, src, body, 1, &mut Own::Note(&mut own))?;
    let to = out.len();
    put(out, "}\n\n");
    copy_head(out, c);
    put(out, "\n{\n");
    outs_in(out, src, start, 1, &mut Own::Print { skip_copy: true })?;
    let mut at = from;
    for n in &own {
        match *n {
            Noted::Kernel(a, b) => {
                out.extend_from_within(at..a);
                at = b;
            }
            Noted::Copy(pos, b, depth) => {
                out.extend_from_within(at..pos);
                outs_in(out, src, b, depth, &mut Own::Print { skip_copy: true })?;
                at = pos;
            }
        }
    }
    out.extend_from_within(at..to);
    put(out, "}\n");
    Ok(())
}

/// Where an entry's own statements lie in its printed body, for its skip copy to print around.
pub(crate) enum Noted<'a, 'm> {
    /// What only the entry prints (`O::Kernel`), printed at these bytes.
    Kernel(usize, usize),
    /// What only the copy prints (`O::Copy`), not printed: where it goes, and at what depth.
    Copy(usize, &'a [O<'m>], usize),
}

/// What `outs` does with what only an entry (`O::Kernel`) or only its skip copy (`O::Copy`)
/// prints: print it for one of them, or print the entry's and note where both go (`rewritten`).
pub(crate) enum Own<'n, 'a, 'm> {
    Print { skip_copy: bool },
    Note(&'n mut Vec<Noted<'a, 'm>>),
}

/// Prints rewritten statements at `depth` tabs.
pub(crate) fn outs<'a, 'm>(
    out: &mut String,
    body: &'a [O<'m>],
    depth: usize,
    own: &mut Own<'_, 'a, 'm>,
) -> Result<(), Error> {
    outs_in(out, "", body, depth, own)
}

/// `outs`, for statements parsed from `src` (see `spelled`).
fn outs_in<'a, 'm>(
    out: &mut String,
    src: &str,
    body: &'a [O<'m>],
    depth: usize,
    own: &mut Own<'_, 'a, 'm>,
) -> Result<(), Error> {
    for o in body {
        match o {
            O::Inst(i) => {
                indent(out, depth);
                inst(out, src, i)?;
                out.push('\n');
            }
            O::Stmt(s) => stmts_in(out, src, std::slice::from_ref(*s), depth)?,
            O::New(s) => stmts_in(out, src, std::slice::from_ref(&**s), depth)?,
            O::Block(b) => {
                indent(out, depth);
                put(out, "{\n");
                outs_in(out, src, b, depth + 1, own)?;
                indent(out, depth);
                put(out, "}\n");
            }
            O::Text(t) => out.push_str(t),
            O::Report(on) => {
                if on.get() {
                    super::report::report(out);
                }
            }
            O::Kernel(b) | O::Copy(b) => {
                let copy_only = matches!(o, O::Copy(_));
                let mut only = Own::Print {
                    skip_copy: copy_only,
                };
                match own {
                    Own::Print { skip_copy } if *skip_copy == copy_only => {
                        outs_in(out, src, b, depth, &mut only)?;
                    }
                    Own::Print { .. } => {}
                    Own::Note(noted) if copy_only => noted.push(Noted::Copy(out.len(), b, depth)),
                    Own::Note(noted) => {
                        let at = out.len();
                        outs_in(out, src, b, depth, &mut only)?;
                        noted.push(Noted::Kernel(at, out.len()));
                    }
                }
            }
        }
    }
    Ok(())
}
use crate::error::Error;
use crate::isa::{Opcode, Sandbox};

/// Prints a whole module.
pub(crate) fn module(m: &Module) -> Result<String, Error> {
    let mut out = String::with_capacity(4096);
    header(&mut out, m, |_| true);
    for f in &m.funcs {
        out.push('\n');
        func(&mut out, f)?;
    }
    Ok(out)
}

/// `.version`, `.target`, `.address_size` and the module variables `keep` selects.
pub(crate) fn header(out: &mut String, m: &Module, keep: impl Fn(&VarDecl) -> bool) {
    // Pushed piece by piece, as `parts` does: `write!` cost more than the rest.
    put(out, ".version ");
    put(out, m.version.as_deref().unwrap_or("7.0"));
    out.push('\n');
    if !m.target.is_empty() {
        put(out, ".target ");
        for (i, t) in m.target.iter().enumerate() {
            if i > 0 {
                put(out, ", ");
            }
            put(out, t);
        }
        out.push('\n');
    }
    put(out, ".address_size ");
    unsigned(out, m.address_size.unwrap_or(64).into());
    put(out, "\n\n");
    for v in m.vars.iter().filter(|v| keep(v)) {
        var(out, v, true);
        put(out, ";\n");
    }
}

fn space(s: Space) -> &'static str {
    match s {
        Space::Global => ".global",
        Space::Const => ".const",
        Space::Shared => ".shared",
        Space::Local => ".local",
        Space::Param => ".param",
    }
}

/// A declaration without the trailing `;`.
pub(crate) fn var(out: &mut String, v: &VarDecl, module_scope: bool) {
    if module_scope {
        if let Some(l) = &v.linkage {
            let _ = write!(out, ".{l} ");
        }
        if v.is_extern {
            put(out, ".extern ");
        }
    }
    put(out, space(v.space));
    // Pushed piece by piece, as `parts` does: `write!` cost more than the rest.
    if let Some(a) = v.align {
        put(out, " .align ");
        unsigned(out, a.into());
    }
    if v.vec > 1 {
        put(out, " .v");
        unsigned(out, v.vec.into());
    }
    put(out, " .");
    put(out, &v.ty);
    out.push(' ');
    put(out, &v.name);
    match v.count {
        Some(0) => put(out, "[]"),
        Some(n) => {
            out.push('[');
            unsigned(out, n);
            out.push(']');
        }
        None => {}
    }
    if !v.init.is_empty() {
        put(out, " = ");
        if v.count.is_some() {
            out.push('{');
        }
        for (i, x) in v.init.iter().enumerate() {
            if i > 0 {
                put(out, ", ");
            }
            match *x {
                Init::Int(n) => {
                    let _ = write!(out, "{n}");
                }
                Init::F32Bits(b) => bits(out, "0f", b.into(), 8),
                Init::F64Bits(b) => bits(out, "0d", b, 16),
                // Refused before printing; `0` keeps the text well-formed regardless.
                Init::Symbol => out.push('0'),
            }
        }
        if v.count.is_some() {
            out.push('}');
        }
    }
}

fn func(out: &mut String, f: &Func) -> Result<(), Error> {
    head(out, f, &[]);
    match &f.body {
        None => put(out, ";\n"),
        Some(b) => {
            put(out, "\n{\n");
            stmts(out, b, 1)?;
            put(out, "}\n");
        }
    }
    Ok(())
}

/// Linkage, kind, results, name, parameters (the `hidden` ones last: `.param .u64
/// __gpuhost_sbx_<h>`) and performance directives; gives where the name lies in `out`.
fn head(out: &mut String, f: &Func, hidden: &[&str]) -> std::ops::Range<usize> {
    if let Some(l) = &f.linkage {
        out.push('.');
        put(out, l);
        out.push(' ');
    }
    put(out, if f.is_entry { ".entry " } else { ".func " });
    if !f.rets.is_empty() {
        params(out, &f.rets, &[]);
        out.push(' ');
    }
    let at = out.len();
    put(out, &f.name);
    let name = at..out.len();
    params(out, &f.params, hidden);
    for (name, vals) in &f.attrs {
        put(out, "\n.");
        put(out, name);
        for (i, v) in vals.iter().enumerate() {
            put(out, if i == 0 { " " } else { ", " });
            unsigned(out, *v);
        }
    }
    name
}

/// A parameter list: `ps`, then the `hidden` values' parameters (`hidden_params`), as `var`
/// prints their declarations (`param_decl`).
fn params(out: &mut String, ps: &[VarDecl], hidden: &[&str]) {
    out.push('(');
    for (i, p) in ps.iter().enumerate() {
        put(out, if i == 0 { "\n\t" } else { ",\n\t" });
        var(out, p, false);
    }
    for (i, h) in hidden.iter().enumerate() {
        put(out, if i + ps.len() == 0 { "\n\t" } else { ",\n\t" });
        put(out, ".param .u64 ");
        put(out, super::params::HIDDEN_PARAM_PREFIX);
        put(out, h);
    }
    put(
        out,
        if ps.is_empty() && hidden.is_empty() {
            ")"
        } else {
            "\n)"
        },
    );
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push('\t');
    }
}

/// Prints statements at `depth` tabs.
pub(crate) fn stmts(out: &mut String, body: &[Stmt], depth: usize) -> Result<(), Error> {
    stmts_in(out, "", body, depth)
}

/// `stmts`, for statements parsed from `src` (see `spelled`).
fn stmts_in(out: &mut String, src: &str, body: &[Stmt], depth: usize) -> Result<(), Error> {
    for s in body {
        match s {
            Stmt::Reg { ty, names, .. } => {
                indent(out, depth);
                put(out, ".reg .");
                put(out, ty);
                out.push(' ');
                for (i, (n, range)) in names.iter().enumerate() {
                    if i > 0 {
                        put(out, ", ");
                    }
                    put(out, n);
                    if let Some(c) = range {
                        out.push('<');
                        unsigned(out, (*c).into());
                        out.push('>');
                    }
                }
                put(out, ";\n");
            }
            Stmt::Var(v) => {
                indent(out, depth);
                var(out, v, false);
                put(out, ";\n");
            }
            Stmt::Label(l, _) => {
                put(out, l);
                put(out, ":\n");
            }
            Stmt::Targets(name, labels, _) => {
                indent(out, depth);
                let _ = writeln!(out, "{name}: .branchtargets {};", labels.join(", "));
            }
            Stmt::Inst(i) => {
                indent(out, depth);
                inst(out, src, i)?;
                out.push('\n');
            }
            Stmt::Block(b) => {
                indent(out, depth);
                put(out, "{\n");
                stmts_in(out, src, b, depth + 1)?;
                indent(out, depth);
                put(out, "}\n");
            }
        }
    }
    Ok(())
}

/// Prints one instruction, parsed from `src` (see `spelled`), with its `;`.
fn inst(out: &mut String, src: &str, i: &Inst) -> Result<(), Error> {
    let line = Line {
        guard: i.guard.as_ref(),
        opcode: &i.opcode,
        mods: &i.mods,
        operands: &i.operands,
        replace: None,
        line: i.line,
    };
    // Its opcode as looked up when parsed (`Inst::op`), not looked up again.
    match spelled(src, &i.opcode, &i.mods) {
        Some(head) => line.print_spelled(out, head, || i.op),
        None => line.print(out, || i.op),
    }
}

/// The opcode and modifiers as one piece of `src`, when that piece is exactly what printing
/// them one by one gives: the opcode's own bytes, then each modifier's own bytes after one `.`
/// (each name lies in `src` itself, where the parser found it, and the byte between is a
/// dot). It is then the parsed form, printed in one copy rather than a push per name and dot
/// (the most of what printing an instruction cost); anything else (a name a pass made, or one
/// moved, or a source with anything between the words) gives `None`, and is printed by parts.
/// Only addresses are compared, so this holds whatever made the names.
fn spelled<'s>(src: &'s str, opcode: &str, mods: &[Str<'_>]) -> Option<&'s str> {
    let base = src.as_ptr() as usize;
    let start = (opcode.as_ptr() as usize).wrapping_sub(base);
    if start > src.len() {
        return None;
    }
    let mut end = start + opcode.len();
    for m in mods {
        if src.as_bytes().get(end) != Some(&b'.')
            || (m.as_ptr() as usize).wrapping_sub(base) != end + 1
        {
            return None;
        }
        end += 1 + m.len();
    }
    src.get(start..end)
}

/// Prints an instruction given by its parts (operand `replace.0` replaced), with its `;`.
pub(crate) fn parts<M: AsRef<str>>(
    out: &mut String,
    guard: Option<&(Str<'_>, bool)>,
    opcode: &str,
    mods: &[M],
    operands: &[Operand],
    replace: Option<(usize, &Operand)>,
    line: u32,
) -> Result<(), Error> {
    let line = Line {
        guard,
        opcode,
        mods,
        operands,
        replace,
        line,
    };
    line.print(out, || Opcode::parse(opcode))
}

/// An instruction's parts, as `parts` takes them.
struct Line<'l, 'a, M> {
    guard: Option<&'l (Str<'a>, bool)>,
    opcode: &'l str,
    mods: &'l [M],
    operands: &'l [Operand<'a>],
    replace: Option<(usize, &'l Operand<'a>)>,
    line: u32,
}

impl<M: AsRef<str>> Line<'_, '_, M> {
    /// Prints the line; `op` gives its opcode, which only an address operand asks for.
    fn print(&self, out: &mut String, op: impl Fn() -> Option<Opcode>) -> Result<(), Error> {
        self.guard(out);
        put(out, self.opcode);
        for m in self.mods {
            out.push('.');
            put(out, m.as_ref());
        }
        self.operands(out, op)
    }

    /// `print`, given the opcode and modifiers as printed (`spelled`).
    fn print_spelled(
        &self,
        out: &mut String,
        head: &str,
        op: impl Fn() -> Option<Opcode>,
    ) -> Result<(), Error> {
        self.guard(out);
        put(out, head);
        self.operands(out, op)
    }

    fn guard(&self, out: &mut String) {
        // Pushed piece by piece: `write!` would cost more than the rest of the line.
        if let Some((g, neg)) = self.guard {
            put(out, if *neg { "@!" } else { "@" });
            put(out, g);
            out.push(' ');
        }
    }

    /// The operands and the `;`.
    fn operands(&self, out: &mut String, op: impl Fn() -> Option<Opcode>) -> Result<(), Error> {
        let (mods, replace) = (self.mods, self.replace);
        // What only a float literal or an address operand asks, found when one is printed (it is
        // then in the instruction): most instructions have neither, and skip comparing their
        // modifiers and looking up their opcode.
        // A decimal float literal is kept as f64 bits; an .f32 instruction gets it as 0f bits.
        let f32_ctx = || {
            mods.iter().any(|m| m.as_ref() == "f32") && !mods.iter().any(|m| m.as_ref() == "f64")
        };
        // `mov`/`cvta` take a symbol's address as a bare `name+off`; everything else brackets it.
        let bare = || op().is_some_and(|o| o.sandbox() == Sandbox::Address);
        for (k, o) in self.operands.iter().enumerate() {
            // Literals of a known length, which are stored in place: a length chosen at run
            // time copied them through `memcpy`.
            if k > 0 {
                put(out, ", ");
            } else {
                out.push(' ');
            }
            let o = match replace {
                Some((at, r)) if at == k => r,
                _ => o,
            };
            // Most operands are registers: printed here, the rest by `operand`.
            match o {
                Operand::Name(n) => put(out, n),
                Operand::Int(v) => int(out, *v),
                Operand::Addr(..) => operand(out, o, false, bare(), self.line)?,
                Operand::F64Bits(_) => operand(out, o, f32_ctx(), false, self.line)?,
                _ => operand(out, o, f32_ctx(), bare(), self.line)?,
            }
        }
        out.push(';');
        Ok(())
    }
}

/// An integer operand as `parts` prints it.
pub(crate) fn int(out: &mut String, v: i64) {
    if v < i64::from(i32::MIN) {
        bits(out, "0x", v as u64, 16);
    } else {
        decimal(out, v);
    }
}

/// `v` in decimal, as `write!` prints it, without the formatting machinery: most operands the
/// rewrite prints are small integers.
fn decimal(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    unsigned(out, v.unsigned_abs());
}

/// `prefix`, then the low `digits` hex digits of `v` in upper case (`0f3F800000`), as
/// `write!(out, "{prefix}{v:0digits$X}")` prints a value of that many digits: a float constant's
/// bits (nearly every float nvcc writes), printed without the formatting machinery, which cost
/// several times the rest of its instruction. Out of line: inlined, its buffer made `int`, which
/// prints every integer operand, dearer on its common path.
#[inline(never)]
fn bits(out: &mut String, prefix: &str, v: u64, digits: usize) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut text = [b'0'; 16];
    let digits = digits.min(text.len());
    for (k, d) in text[..digits].iter_mut().rev().enumerate() {
        *d = HEX[((v >> (4 * k)) & 0xF) as usize];
    }
    put(out, prefix);
    // ASCII digits: always valid text.
    put(
        out,
        std::str::from_utf8(&text[..digits]).unwrap_or_default(),
    );
}

/// `n` in decimal, as `write!` prints it (see `decimal`).
pub(crate) fn unsigned(out: &mut String, mut n: u64) {
    // Most numbers printed are one or two digits (offsets, counts, widths): pushed directly.
    if n < 100 {
        if n >= 10 {
            out.push(char::from(b'0' + (n / 10) as u8));
        }
        out.push(char::from(b'0' + (n % 10) as u8));
        return;
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Reserved once, then pushed: `extend` over the digits cost more than computing them.
    out.reserve(digits.len() - at);
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

fn operand(out: &mut String, o: &Operand, f32_ctx: bool, bare: bool, line: u32) -> R {
    match o {
        Operand::Name(n) => put(out, n),
        Operand::Not(n) => {
            out.push('!');
            put(out, n);
        }
        Operand::Pair(p) => {
            put(out, &p.0);
            out.push('|');
            put(out, &p.1);
        }
        Operand::Int(v) => int(out, *v),
        Operand::F32Bits(b) => bits(out, "0f", (*b).into(), 8),
        Operand::F64Bits(b) if f32_ctx => {
            bits(out, "0f", (f64::from_bits(*b) as f32).to_bits().into(), 8);
        }
        Operand::F64Bits(b) => bits(out, "0d", *b, 16),
        Operand::Addr(base, off) => {
            if !bare {
                out.push('[');
            }
            match base {
                Some(b) => {
                    put(out, b);
                    if *off != 0 {
                        out.push('+');
                        int(out, *off);
                    }
                }
                None => int(out, *off),
            }
            if !bare {
                out.push(']');
            }
        }
        Operand::Vec(v) | Operand::List(v) => {
            let (open, close) = if matches!(o, Operand::Vec(_)) {
                ('{', '}')
            } else {
                ('(', ')')
            };
            out.push(open);
            for (k, x) in v.iter().enumerate() {
                if k > 0 {
                    put(out, ", ");
                }
                // Nearly every element is a register (`mma`'s fragments): printed here, not
                // through a call each.
                match x {
                    Operand::Name(n) => put(out, n),
                    x => operand(out, x, f32_ctx, bare, line)?,
                }
            }
            out.push(close);
        }
        Operand::Sink => out.push('_'),
        Operand::Image(..) => return Err(image_refused(line)),
    }
    Ok(())
}

/// The error for a texture or surface operand, built out of line: `operand` runs for every
/// operand printed, and building it in place made its every call save and restore more.
#[cold]
#[inline(never)]
fn image_refused(line: u32) -> Error {
    Error::Refused {
        line,
        what: "texture/surface operands are not allowed in sandboxed modules; \
               read the data with ld.global instead"
            .into(),
    }
}

type R = Result<(), Error>;

#[cfg(test)]
mod tests {
    use crate::ast::{Stmt, Str};

    /// `spelled` gives exactly what printing the opcode and modifiers one by one gives, or
    /// nothing: for every modifier form (`::`, vector widths, several in a row), for words
    /// apart in the source, and for a modifier a pass replaced.
    #[test]
    fn spelled_is_the_printing_by_parts() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.entry k()\n{\n\
                   .reg .b32 %r<3>;\n.reg .f32 %f<3>;\n.reg .b64 %rd<2>;\n\
                   ld.global.L2::128B.v2.f32 {%f1, %f2}, [%rd1];\n\
                   cvt.rn.ftz.f32.f32 %f1, %f2;\nadd.s32 %r1, %r2, 1;\nret;\n\
                   mov.b32 /* c */ .b32 %r1, %r2;\n}\n";
        let tokens = crate::lex::lex(src).unwrap();
        let mut m = crate::parse::parse(&tokens).unwrap();
        let body = m.funcs[0].body.as_mut().unwrap();
        let mut seen = 0;
        for s in body.iter_mut() {
            let Stmt::Inst(i) = s else { continue };
            let by_parts: String = std::iter::once(i.opcode.to_string())
                .chain(i.mods.iter().map(|m| format!(".{m}")))
                .collect();
            match super::spelled(src, &i.opcode, &i.mods) {
                Some(h) => {
                    assert_eq!(h, by_parts);
                    seen += 1;
                }
                None => assert_eq!(i.opcode, "mov"),
            }
            if let Some(m) = i.mods.first_mut() {
                *m = Str::borrowed("u32");
                assert_eq!(super::spelled(src, &i.opcode, &i.mods), None);
            }
        }
        assert_eq!(seen, 4);
        assert_eq!(super::spelled("", "ret", &[]), None);
    }

    #[test]
    fn bits_print_what_write_prints() {
        for v in [
            0,
            1,
            0x3F80_0000,
            0xFFFF_FFFF,
            0xDEAD_BEEF_0123_4567,
            u64::MAX,
        ] {
            let mut out = String::new();
            super::bits(&mut out, "0d", v, 16);
            assert_eq!(out, format!("0d{v:016X}"));
            let mut out = String::new();
            super::bits(&mut out, "0f", v & 0xFFFF_FFFF, 8);
            assert_eq!(out, format!("0f{:08X}", v & 0xFFFF_FFFF));
        }
    }

    #[test]
    fn decimal_prints_what_write_prints() {
        for v in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            1024,
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = String::new();
            super::decimal(&mut out, v);
            assert_eq!(out, v.to_string());
        }
        for n in [0, 7, 10, 42, 99, 100, 4096, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::new();
            super::unsigned(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }
}
