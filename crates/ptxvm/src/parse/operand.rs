//! The parser's instructions and operands: a guard, an opcode with its modifiers, and operands
//! (registers, numbers, addresses, vectors, lists), each bounded (`MAX_LIST`) so hostile input
//! cannot make a list grow without end.

use super::{MAX_LIST, Parser, R};
use crate::ast::{Inst, Operand, Str};
use crate::isa::Opcode;
use crate::lex::Tok;
use crate::small::{Item, fill};

impl<'s> Parser<'_, 's> {
    /// An instruction, into `inst` (an empty one, its line set). Notes in `owning` an operand
    /// that owns heap memory (only `operand`'s rarer forms may: names here borrow the text).
    pub(super) fn inst(&mut self, inst: &mut Inst<'s>) -> R<()> {
        if self.eat_punct('@') {
            let neg = self.eat_punct('!');
            inst.guard = Some((self.ident()?.into(), neg));
        }
        let opcode = self.ident()?;
        // Over the empty opcode `stmts` made.
        fill(&mut inst.opcode, Str::borrowed(opcode));
        inst.op = Opcode::parse(opcode);
        while let Some(Tok::Dot(d)) = self.peek() {
            fill(inst.mods.push_slot(), Str::borrowed(d));
            self.i += 1;
        }
        if !self.eat_punct(';') {
            loop {
                let slot = inst.operands.push_slot();
                if !self.plain_operand(slot) {
                    let o = self.operand()?;
                    self.owning |= !o.owns_nothing();
                    fill(slot, o);
                }
                if self.eat_punct(';') {
                    break;
                }
                self.expect_punct(',')?;
            }
        }
        Ok(())
    }

    /// The common operands, taken here without the general path's calls, each of which
    /// returned its operand in memory: a name that ends its operand (`,` or `;` follows), a
    /// number, and a bare register address (`[%rd1]`), put straight into `slot`. Anything else
    /// is left to `operand` (`false`, `slot` untouched).
    #[inline]
    pub(super) fn plain_operand(&mut self, slot: &mut Operand<'s>) -> bool {
        let tok = |k: usize| self.t.get(self.i + k).map(|t| &t.tok);
        let n = match tok(0) {
            Some(&Tok::Ident(s)) if s != "_" && matches!(tok(1), Some(Tok::Punct(',' | ';'))) => {
                fill(slot, Operand::Name(Str::borrowed(s)));
                1
            }
            Some(&Tok::Int(v)) => {
                fill(slot, Operand::Int(v as i64));
                1
            }
            Some(&Tok::F32Bits(b)) => {
                fill(slot, Operand::F32Bits(b));
                1
            }
            Some(&Tok::F64Bits(b)) => {
                fill(slot, Operand::F64Bits(b));
                1
            }
            Some(Tok::Punct('[')) => match (tok(1), tok(2)) {
                (Some(&Tok::Ident(s)), Some(Tok::Punct(']'))) => {
                    fill(slot, Operand::Addr(Some(Str::borrowed(s)), 0));
                    3
                }
                _ => return false,
            },
            _ => return false,
        };
        self.i += n;
        true
    }

    /// A name, joining special-register suffixes (`%tid.x`) that the lexer left apart (written
    /// with a space); those are the one kind of name the tree owns.
    pub(super) fn name(&mut self) -> R<Str<'s>> {
        let n = self.ident()?;
        if n.starts_with('%')
            && let Some(Tok::Dot(d)) = self.peek()
            && matches!(*d, "x" | "y" | "z" | "w")
        {
            self.i += 1;
            return Ok(Str::owned(format!("{n}.{d}")));
        }
        Ok(Str::borrowed(n))
    }

    pub(super) fn operand(&mut self) -> R<Operand<'s>> {
        match self.peek() {
            Some(Tok::Punct('[')) => {
                self.i += 1;
                let mut base = None;
                let mut off: i64 = 0;
                if let Some(Tok::Ident(_)) = self.peek() {
                    base = Some(self.name()?);
                    if self.eat_punct(',') {
                        // Texture/surface coordinates: `[tex, {x, y}]` (or one bare `x`).
                        let handle = base.unwrap_or_default();
                        let coords = match self.operand()? {
                            Operand::Vec(v) => v,
                            o => vec![o],
                        };
                        self.expect_punct(']')?;
                        return Ok(Operand::Image(Box::new((handle, coords))));
                    }
                    if self.eat_punct('+') {
                        off = self.signed()?;
                    } else if self.eat_punct('-') {
                        off = self.signed()?.wrapping_neg();
                    }
                } else {
                    off = self.signed()?;
                }
                self.expect_punct(']')?;
                Ok(Operand::Addr(base, off))
            }
            Some(Tok::Punct('{')) | Some(Tok::Punct('(')) => {
                let brace = self.is_punct('{');
                let close = if brace { '}' } else { ')' };
                self.i += 1;
                // Sized for its elements at once: grown from empty, a list of four (`mma`'s
                // fragments) was allocated twice, one of eight (`wmma`'s) three times.
                let mut v = Vec::with_capacity(self.list_len(close));
                if !self.eat_punct(close) {
                    loop {
                        if v.len() > MAX_LIST {
                            return self.err("operand list too long");
                        }
                        v.push(self.scalar_operand()?);
                        if self.eat_punct(close) {
                            break;
                        }
                        self.expect_punct(',')?;
                    }
                }
                Ok(if brace {
                    Operand::Vec(v)
                } else {
                    Operand::List(v)
                })
            }
            _ => self.scalar_operand(),
        }
    }

    /// How many elements the list whose first token is next seems to hold, from its commas
    /// before `close` (or a `;`): what it is sized for. At most `MAX_LIST + 1`, the longest list
    /// `operand` takes, so a hostile list costs no more to look ahead in than to parse.
    pub(super) fn list_len(&self, close: char) -> usize {
        if self.is_punct(close) {
            return 0;
        }
        let mut n = 1;
        for t in self.t.get(self.i..).unwrap_or_default() {
            match t.tok {
                Tok::Punct(',') => n += 1,
                Tok::Punct(c) if c == close || c == ';' => break,
                _ => {}
            }
            if n > MAX_LIST + 1 {
                break;
            }
        }
        n
    }

    pub(super) fn signed(&mut self) -> R<i64> {
        let neg = self.eat_punct('-');
        let v = self.int()? as i64;
        Ok(if neg { v.wrapping_neg() } else { v })
    }

    pub(super) fn scalar_operand(&mut self) -> R<Operand<'s>> {
        match self.peek() {
            Some(Tok::Punct('!')) => {
                self.i += 1;
                Ok(Operand::Not(self.name()?))
            }
            Some(Tok::Punct('-')) => {
                self.i += 1;
                match self.next()? {
                    Tok::Int(v) => Ok(Operand::Int((*v as i64).wrapping_neg())),
                    Tok::F32Bits(b) => Ok(Operand::F32Bits(b ^ 0x8000_0000)),
                    Tok::F64Bits(b) => Ok(Operand::F64Bits(b ^ (1 << 63))),
                    _ => {
                        self.i -= 1;
                        self.err("expected a number after '-'")
                    }
                }
            }
            Some(Tok::Int(v)) => {
                self.i += 1;
                Ok(Operand::Int(*v as i64))
            }
            Some(Tok::F32Bits(b)) => {
                self.i += 1;
                Ok(Operand::F32Bits(*b))
            }
            Some(Tok::F64Bits(b)) => {
                self.i += 1;
                Ok(Operand::F64Bits(*b))
            }
            Some(Tok::Ident(s)) if *s == "_" => {
                self.i += 1;
                Ok(Operand::Sink)
            }
            Some(Tok::Ident(_)) => {
                let n = self.name()?;
                if self.eat_punct('|') {
                    let m = self.name()?;
                    return Ok(Operand::Pair(Box::new((n, m))));
                }
                if self.eat_punct('+') {
                    let off = self.signed()?;
                    return Ok(Operand::Addr(Some(n), off));
                }
                Ok(Operand::Name(n))
            }
            _ => self.err("expected an operand"),
        }
    }
}
