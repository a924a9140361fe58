//! Parser: tokens → `ast::Module`. Recursive descent with a nesting limit so hostile input cannot
//! overflow the stack; debug-info directives are skipped here so later stages never see them.

use crate::ast::{Func, Init, Inst, Module, Space, Stmt, Str, VarDecl};
use crate::error::Error;
use crate::lex::{Tok, Token, Tokens};
use crate::small::Small;

mod operand;

/// Deepest `{ }` nesting accepted (nvcc nests one level around calls).
const MAX_DEPTH: u32 = 64;
/// A `{..}` or `(..)` operand list with more than `MAX_LIST + 1` elements is refused (the
/// check runs before each element is taken).
const MAX_LIST: usize = 64;
/// Largest initialiser list accepted, in elements.
const MAX_INIT: usize = 1 << 22;

/// Tokens `'t` of source text `'s`: the tree borrows its names from the text, not the tokens.
struct Parser<'t, 's> {
    t: &'t [Token<'s>],
    i: usize,
    tokens: &'t Tokens<'s>,
    /// Where `Tokens::block_ends` looks next.
    block: usize,
    /// The instruction being parsed has an operand that owns heap memory (`inst`).
    owning: bool,
}

/// The parser's results carry a boxed error: `Error` is over 100 bytes, and every result
/// (an operand's, a name's) was as large, copied at each return and each `?`.
type R<T> = Result<T, Box<Error>>;

/// Parameters a list has room for before it grows (`Parser::param_list`).
const PARAMS_ROOM: usize = 8;

/// Parses a token stream into a module.
pub(crate) fn parse<'s>(tokens: &Tokens<'s>) -> Result<Module<'s>, Error> {
    let mut p = Parser {
        t: tokens,
        i: 0,
        tokens,
        block: 0,
        owning: false,
    };
    let mut m = Module::default();
    while !p.at_end() {
        p.top_level(&mut m).map_err(|e| *e)?;
    }
    Ok(m)
}

impl<'t, 's> Parser<'t, 's> {
    fn at_end(&self) -> bool {
        self.i >= self.t.len()
    }
    #[inline]
    fn peek(&self) -> Option<&'t Tok<'s>> {
        self.t.get(self.i).map(|t| &t.tok)
    }
    fn pos(&self) -> (u32, u32) {
        match self.t.get(self.i).or(self.t.last()) {
            Some(t) => (t.line, self.tokens.col(t)),
            None => (1, 1),
        }
    }
    fn line(&self) -> u32 {
        self.t.get(self.i).or(self.t.last()).map_or(1, |t| t.line)
    }
    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(self.error(msg.into()))
    }
    /// The error `err` returns, out of line: the paths that ask for a token stay small enough
    /// to inline where nothing goes wrong.
    #[cold]
    #[inline(never)]
    fn error(&self, mut msg: String) -> Box<Error> {
        let (line, col) = self.pos();
        match self.peek() {
            Some(t) => msg.push_str(&format!(" (found {t:?})")),
            None => msg.push_str(" (found end of input)"),
        }
        Box::new(Error::Parse { line, col, msg })
    }
    fn next(&mut self) -> R<&'t Tok<'s>> {
        match self.t.get(self.i) {
            Some(t) => {
                self.i += 1;
                Ok(&t.tok)
            }
            None => self.err("unexpected end of input"),
        }
    }
    #[inline]
    fn is_punct(&self, c: char) -> bool {
        // A match, not `==` on tokens: the derived comparison was a call per question.
        matches!(self.peek(), Some(Tok::Punct(x)) if *x == c)
    }
    #[inline]
    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    #[inline]
    fn expect_punct(&mut self, c: char) -> R<()> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            Err(self.error(format!("expected '{c}'")))
        }
    }
    fn is_dot(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Dot(d)) if *d == w)
    }
    fn eat_dot(&mut self, w: &str) -> bool {
        if self.is_dot(w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    #[inline]
    fn ident(&mut self) -> R<&'s str> {
        match self.peek() {
            Some(&Tok::Ident(s)) => {
                self.i += 1;
                Ok(s)
            }
            _ => Err(self.error("expected a name".into())),
        }
    }
    /// A name being declared (a function, variable, register or label). `_` alone is no PTX
    /// identifier but the sink operand, which NVIDIA's JIT refuses as a name: declared here, it
    /// would be a name no operand can spell (the sandbox's own uses of it would not load).
    fn declared(&mut self) -> R<&'s str> {
        if let Some(Tok::Ident("_")) = self.peek() {
            return Err(self.error(
                "`_` is the sink operand, not a name: declare the function, variable, register \
                 or label under another name"
                    .into(),
            ));
        }
        self.ident()
    }
    fn int(&mut self) -> R<u64> {
        match self.peek() {
            Some(Tok::Int(v)) => {
                self.i += 1;
                Ok(*v)
            }
            _ => self.err("expected an integer"),
        }
    }
    fn small_int(&mut self) -> R<u32> {
        let v = self.int()?;
        u32::try_from(v).or_else(|_| self.err("integer too large"))
    }
    /// Skips the remaining tokens on the current source line.
    fn skip_line(&mut self, line: u32) {
        while self.t.get(self.i).is_some_and(|t| t.line == line) {
            self.i += 1;
        }
    }

    fn top_level(&mut self, m: &mut Module<'s>) -> R<()> {
        let line = self.line();
        match self.peek() {
            Some(Tok::Dot(d)) => match *d {
                "version" => {
                    self.i += 1;
                    m.version = Some(match self.next()? {
                        Tok::F64Bits(b) => version_text(f64::from_bits(*b)),
                        Tok::Int(v) => format!("{v}.0"),
                        _ => {
                            self.i -= 1;
                            return self.err("expected a PTX version number");
                        }
                    });
                    Ok(())
                }
                "target" => {
                    self.i += 1;
                    loop {
                        m.target.push(self.ident()?.to_string());
                        if !self.eat_punct(',') {
                            return Ok(());
                        }
                    }
                }
                "address_size" => {
                    self.i += 1;
                    m.address_size = Some(self.small_int()?);
                    Ok(())
                }
                "file" | "loc" => {
                    self.skip_line(line);
                    Ok(())
                }
                "pragma" => self.skip_to_semicolon(),
                "section" => self.skip_section(),
                _ => self.decl(m),
            },
            _ => self.err("expected a directive at module scope"),
        }
    }

    fn skip_to_semicolon(&mut self) -> R<()> {
        while !self.eat_punct(';') {
            self.next()?;
        }
        Ok(())
    }

    fn skip_section(&mut self) -> R<()> {
        self.i += 1;
        while !self.is_punct('{') {
            self.next()?;
        }
        let mut depth = 0u32;
        loop {
            match self.next()? {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
    }

    /// Linkage-prefixed declaration: a function or a module-scope variable.
    fn decl(&mut self, m: &mut Module<'s>) -> R<()> {
        let mut is_extern = false;
        let mut linkage = None;
        loop {
            if let Some(Tok::Dot(d)) = self.peek()
                && matches!(*d, "visible" | "weak" | "common")
            {
                linkage = Some(d.to_string());
                self.i += 1;
                continue;
            }
            if self.eat_dot("extern") {
                is_extern = true;
                continue;
            }
            break;
        }
        if is_extern && linkage.is_none() {
            linkage = Some("extern".into());
        }
        if self.eat_dot("entry") {
            let mut f = self.func(true)?;
            f.linkage = linkage;
            m.funcs.push(f);
            Ok(())
        } else if self.eat_dot("func") {
            let mut f = self.func(false)?;
            f.linkage = linkage;
            m.funcs.push(f);
            Ok(())
        } else {
            let mut v = self.var_decl()?;
            v.is_extern = is_extern;
            v.linkage = linkage.filter(|l| l != "extern");
            self.expect_punct(';')?;
            m.vars.push(v);
            Ok(())
        }
    }

    fn func(&mut self, is_entry: bool) -> R<Func<'s>> {
        let line = self.line();
        let mut rets = Vec::new();
        if self.is_punct('(') {
            rets = self.param_list()?;
        }
        let name = self.declared()?;
        let mut params = Vec::new();
        if self.is_punct('(') {
            params = self.param_list()?;
        }
        let mut max_threads = None;
        let mut attrs = Vec::new();
        while let Some(&Tok::Dot(word)) = self.peek() {
            if matches!(word, "maxntid" | "reqntid") {
                self.i += 1;
                let mut n = 1u64;
                let mut dims = Vec::new();
                loop {
                    let v = self.int()?;
                    dims.push(v);
                    n = n.saturating_mul(v);
                    if dims.len() >= 3 || !self.eat_punct(',') {
                        break;
                    }
                }
                max_threads = Some(u32::try_from(n).unwrap_or(u32::MAX));
                attrs.push((word.to_string(), dims));
            } else if matches!(
                word,
                "minnctapersm" | "maxnreg" | "maxnctapersm" | "maxclusterrank"
            ) {
                self.i += 1;
                let v = self.int()?;
                attrs.push((word.to_string(), vec![v]));
            } else if word == "noreturn" {
                self.i += 1;
                attrs.push((word.to_string(), Vec::new()));
            } else if self.eat_dot("pragma") {
                while !self.eat_punct(';') {
                    self.next()?;
                }
            } else {
                break;
            }
        }
        // Room for a body's usual declarations and call blocks: grown from empty, the note
        // was reallocated about six times per function.
        let mut heap_stmts = Vec::with_capacity(32);
        let body = if self.eat_punct(';') {
            None
        } else {
            self.expect_punct('{')?;
            Some(self.stmts(1, Some(&mut heap_stmts))?)
        };
        Ok(Func {
            name: name.into(),
            is_entry,
            params,
            rets,
            max_threads,
            linkage: None,
            attrs,
            body,
            heap_stmts: Some(heap_stmts),
            line,
        })
    }

    fn param_list(&mut self) -> R<Vec<VarDecl<'s>>> {
        self.expect_punct('(')?;
        if self.eat_punct(')') {
            return Ok(Vec::new());
        }
        // Room for a kernel's usual few: grown from one, a list of five was copied three times.
        let mut v = Vec::with_capacity(PARAMS_ROOM);
        loop {
            v.push(self.var_decl()?);
            if self.eat_punct(')') {
                return Ok(v);
            }
            self.expect_punct(',')?;
        }
    }

    /// `.space [attrs] .type name[dims] [= init]` without the trailing `;`.
    fn var_decl(&mut self) -> R<VarDecl<'s>> {
        let line = self.line();
        let space = match self.next()? {
            Tok::Dot(d) => match *d {
                "global" => Space::Global,
                "const" => Space::Const,
                "shared" => Space::Shared,
                "local" => Space::Local,
                "param" => Space::Param,
                "reg" => Space::Local,
                "tex" | "surf" | "sampler" | "texref" | "surfref" | "samplerref" => {
                    return Err(Box::new(Error::Unsupported {
                        line,
                        what: format!(".{d} variables"),
                    }));
                }
                _ => {
                    self.i -= 1;
                    return self.err("expected a state space");
                }
            },
            _ => {
                self.i -= 1;
                return self.err("expected a declaration");
            }
        };
        let (mut ty, mut vec, mut align) = (None, 1u32, None);
        while let Some(&Tok::Dot(d)) = self.peek() {
            self.i += 1;
            match d {
                "align" => align = Some(self.small_int()?),
                "v2" => vec = 2,
                "v4" => vec = 4,
                "v8" => vec = 8,
                "ptr" | "global" | "shared" | "const" | "local" => {}
                _ => ty = Some(d),
            }
        }
        let Some(ty) = ty else {
            return self.err("expected a type in declaration");
        };
        let name = self.declared()?;
        let mut count = None;
        while self.eat_punct('[') {
            let n = if self.is_punct(']') { 0 } else { self.int()? };
            self.expect_punct(']')?;
            count = Some(count.unwrap_or(1u64).saturating_mul(n));
        }
        let mut init = Vec::new();
        if self.eat_punct('=') {
            self.init_list(&mut init, 0)?;
        }
        Ok(VarDecl {
            space,
            name: name.into(),
            ty: ty.into(),
            vec,
            align,
            count,
            init,
            is_extern: false,
            linkage: None,
            line,
        })
    }

    fn init_list(&mut self, out: &mut Vec<Init>, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return self.err("initialiser nested too deeply");
        }
        if self.eat_punct('{') {
            loop {
                self.init_list(out, depth + 1)?;
                if self.eat_punct('}') {
                    return Ok(());
                }
                self.expect_punct(',')?;
            }
        }
        if out.len() >= MAX_INIT {
            return self.err("initialiser too long");
        }
        let neg = self.eat_punct('-');
        let line = self.line();
        let v = match self.next()? {
            Tok::Int(v) => Init::Int(if neg { -(*v as i128) } else { *v as i128 }),
            Tok::F32Bits(b) if !neg => Init::F32Bits(*b),
            Tok::F64Bits(b) if !neg => Init::F64Bits(*b),
            Tok::Ident(_) => {
                // `sym`, `sym+4`, `generic(sym)+4`: kept as a marker; lowering rejects it.
                if self.eat_punct('(') {
                    self.ident()?;
                    self.expect_punct(')')?;
                }
                if self.eat_punct('+') || self.eat_punct('-') {
                    self.int()?;
                }
                let _ = line;
                Init::Symbol
            }
            _ => {
                self.i -= 1;
                return self.err("expected an initialiser value");
            }
        };
        out.push(v);
        Ok(())
    }

    /// Statements up to the matching `}` (already consumed `{`); given `heap`, the indices of
    /// those that own heap memory go there (`Func::heap_stmts`).
    fn stmts(&mut self, depth: u32, mut heap: Option<&mut Vec<u32>>) -> R<Vec<Stmt<'s>>> {
        if depth > MAX_DEPTH {
            return self.err("blocks nested too deeply");
        }
        let mut out = Vec::with_capacity(self.statements_ahead());
        // Every statement but a label or an instruction owns a list (or may: a declaration);
        // an instruction does when a list of it left its inline slots, or an operand owns
        // memory (`owning`, which `inst` sets).
        let mut owning = |out: &Vec<Stmt<'s>>| {
            if let Some(h) = heap.as_deref_mut() {
                h.push(out.len() as u32 - 1);
            }
        };
        loop {
            let Some(&Token { ref tok, line, .. }) = self.t.get(self.i) else {
                return self.err("missing '}'");
            };
            match tok {
                Tok::Punct('}') => {
                    self.i += 1;
                    return Ok(out);
                }
                Tok::Punct('{') => {
                    self.i += 1;
                    out.push(Stmt::Block(self.stmts(depth + 1, None)?));
                    owning(&out);
                }
                Tok::Dot(d) => match *d {
                    "reg" => {
                        out.push(self.reg_decl()?);
                        owning(&out);
                    }
                    "loc" | "file" => self.skip_line(line),
                    "pragma" => self.skip_to_semicolon()?,
                    "shared" | "local" | "param" | "const" | "global" => {
                        let v = self.var_decl()?;
                        self.expect_punct(';')?;
                        out.push(Stmt::Var(v));
                        owning(&out);
                    }
                    _ => {
                        return Err(Box::new(Error::Unsupported {
                            line,
                            what: format!("directive .{d} inside a function body"),
                        }));
                    }
                },
                &Tok::Ident(name) if matches!(self.t.get(self.i + 1), Some(t) if t.tok == Tok::Punct(':')) =>
                {
                    // The label's name (checked like any declared name), then its `:`.
                    self.declared()?;
                    self.i += 1;
                    if self.eat_dot("branchtargets") {
                        let mut labels = Vec::new();
                        loop {
                            labels.push(self.ident()?.into());
                            if self.eat_punct(';') {
                                break;
                            }
                            self.expect_punct(',')?;
                        }
                        out.push(Stmt::Targets(name.into(), labels, line));
                        owning(&out);
                    } else {
                        out.push(Stmt::Label(name.into(), line));
                    }
                }
                _ => {
                    // Parsed in place: built aside, an instruction was copied three times
                    // over (its lists into it, it into a statement, that into the body). The
                    // empty one is written straight into the body's spare slot: `push` built it
                    // on the stack and copied all of its bytes in, a `memcpy` per instruction,
                    // and `extend` from `once_with` or `resize_with`, which made it in place
                    // too, stayed a call per instruction.
                    if out.len() == out.capacity() {
                        out.reserve(1);
                    }
                    if let Some(slot) = out.spare_capacity_mut().first_mut() {
                        slot.write(Stmt::Inst(Inst {
                            guard: None,
                            opcode: Str::borrowed(""),
                            op: None,
                            mods: Small::new(),
                            operands: Small::new(),
                            line,
                        }));
                        // SAFETY: the first slot past the length was just written.
                        unsafe { out.set_len(out.len() + 1) };
                    }
                    if let Some(Stmt::Inst(i)) = out.last_mut() {
                        self.inst(i)?;
                        if self.owning || i.mods.spilled() || i.operands.spilled() {
                            self.owning = false;
                            owning(&out);
                        }
                    }
                }
            }
        }
    }

    /// An upper bound on the statements of the block being parsed (`{` consumed), which the
    /// lexer counted: growing the block's vector copied every statement parsed so far each time
    /// it doubled, and counting here cost a second scan of the block's tokens.
    fn statements_ahead(&mut self) -> usize {
        let at = self.i.wrapping_sub(1);
        self.tokens
            .block_ends(at, &mut self.block)
            .map_or(0, |n| n as usize)
    }

    fn reg_decl(&mut self) -> R<Stmt<'s>> {
        let line = self.line();
        self.i += 1;
        let mut ty = None;
        while let Some(Tok::Dot(d)) = self.peek() {
            if *d == "v2" || *d == "v4" {
                return Err(Box::new(Error::Unsupported {
                    line,
                    what: "vector registers".into(),
                }));
            }
            ty = Some(*d);
            self.i += 1;
        }
        let Some(ty) = ty else {
            return self.err("expected a register type");
        };
        let mut names = Vec::new();
        loop {
            let n = self.declared()?;
            let range = if self.eat_punct('<') {
                let c = self.small_int()?;
                self.expect_punct('>')?;
                Some(c)
            } else {
                None
            };
            names.push((n.into(), range));
            if self.eat_punct(';') {
                break;
            }
            self.expect_punct(',')?;
        }
        Ok(Stmt::Reg {
            ty: ty.into(),
            names,
            line,
        })
    }
}

/// A `.version` number as `format!("{:.1}")` spells it. A version is a number of one decimal
/// (`8.5`), spelled here from its tenths as two integers: `{:.1}` of the float took the
/// formatter's exact path (`dragon`), some 2,000 instructions a module, a twentieth of
/// rewriting an empty one. Any other number is left to `format!`.
fn version_text(v: f64) -> String {
    let tenths = (v * 10.0).round();
    // Within a millionth of a tenth, `v` rounds to `tenths / 10` at one decimal whatever its
    // last bits (the rounding boundaries lie half a tenth away).
    if (0.0..1e6).contains(&tenths) && (v * 10.0 - tenths).abs() < 1e-6 {
        let t = tenths as u64;
        return format!("{}.{}", t / 10, t % 10);
    }
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Operand;
    use crate::lex::lex;

    fn parse_text(s: &str) -> Result<Module<'_>, Error> {
        parse(&lex(s)?)
    }

    #[test]
    fn parses_entry_with_params_regs_and_instructions() {
        let m = parse_text(
            r#"
.version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 .ptr .global .align 4 k_p0, .param .u32 n) .maxntid 256, 1, 1
{
  .reg .pred %p<2>;
  .reg .b32 %r<5>;
  mov.u32 %r1, %tid.x;
  @!%p1 bra $L__BB0_2;
  st.global.v2.f32 [%rd1+-8], {%f1, %f2};
$L__BB0_2:
  ret;
}"#,
        )
        .unwrap();
        let f = &m.funcs[0];
        assert_eq!(f.name, "k");
        assert_eq!(f.params.len(), 2);
        assert_eq!(f.max_threads, Some(256));
        let body = f.body.as_ref().unwrap();
        let Stmt::Inst(i) = &body[2] else { panic!() };
        assert_eq!(i.operands[1], Operand::Name("%tid.x".into()));
        let Stmt::Inst(i) = &body[3] else { panic!() };
        assert_eq!(i.guard, Some(("%p1".into(), true)));
        let Stmt::Inst(i) = &body[4] else { panic!() };
        assert_eq!(i.operands[0], Operand::Addr(Some("%rd1".into()), -8));
        assert!(matches!(&body[5], Stmt::Label(l, _) if l == "$L__BB0_2"));
    }

    #[test]
    fn parses_globals_with_initialisers_and_skips_debug_sections() {
        let m = parse_text(
            r#"
.global .align 4 .b32 tbl[3] = {1, -2, 3};
.extern .shared .align 16 .b8 smem[];
.section .debug_abbrev { .b8 17 }
.const .f32 k = 0f3F800000;"#,
        )
        .unwrap();
        assert_eq!(m.vars.len(), 3);
        assert_eq!(m.vars[0].count, Some(3));
        assert!(matches!(m.vars[0].init[1], Init::Int(-2)));
        assert!(m.vars[1].is_extern && m.vars[1].count == Some(0));
    }

    /// A version number is spelled as `format!("{:.1}")` spells it, for one-decimal numbers
    /// (the fast path) and others (left to `format!`).
    #[test]
    fn version_numbers_are_spelled_as_format_spells_them() {
        let mut cases: Vec<f64> = (0..2000).map(|t| f64::from(t) / 10.0).collect();
        cases.extend([
            8.25, 8.35, 7.05, 0.05, 12.345, 1e7, 123456.7, 99999.95, 1e300,
        ]);
        for v in cases {
            assert_eq!(super::version_text(v), format!("{v:.1}"), "{v}");
        }
    }

    #[test]
    fn malformed_input_is_an_error_with_position() {
        for src in [
            ".entry k( {",
            ".entry k() { mov.u32 %r1 %r2; }",
            ".entry k() { add.s32 %r1, [; }",
            "mov.u32 %r1, 1;",
            ".entry k() {",
        ] {
            assert!(matches!(parse_text(src), Err(Error::Parse { .. })), "{src}");
        }
        let deep = format!(".entry k() {}{}", "{".repeat(10_000), "}".repeat(10_000));
        assert!(parse_text(&deep).is_err());
    }
}
