//! A quick look for back-edges: most functions have no loop, and seeing that from their labels
//! and branches costs a fraction of laying out their control flow (`Cfg::new`, which version.rs
//! and the allow-list each ask for every body).

use super::hash::{HashSet, HashSetExt};
use crate::ast::{Inst, Operand, Stmt};
use crate::isa::Opcode;

/// Whether `body` may have a back-edge (`Cfg::back`): false only when every branch is a `bra`
/// to a label that comes after it, nested blocks included. A label named twice counts where it
/// comes last, as in `Cfg::new`: one seen before the branch counts as behind it (only ever an
/// answer of "may loop", which lays out the flow).
pub(super) fn may_loop(body: &[Stmt<'_>]) -> bool {
    fn walk<'b>(body: &'b [Stmt<'b>], look: &mut Look<'b>) -> bool {
        for s in body {
            match s {
                Stmt::Label(l, _) => look.label(l),
                Stmt::Inst(i) => {
                    look.inst(i);
                    if look.back {
                        return true;
                    }
                }
                Stmt::Block(b) if walk(b, look) => return true,
                _ => {}
            }
        }
        false
    }
    let mut look = Look::for_body(body);
    walk(body, &mut look) || look.may_loop()
}

/// What [`may_loop`] notes of a body's labels and branches, in order. Apart from its walk so
/// that the allow-list's own walk over every body takes the look in passing (`allow::Walk`),
/// where a walk of its own cost as much as the rest of the look.
#[derive(Default)]
pub(super) struct Look<'b> {
    seen: HashSet<&'b str>,
    /// Targets of the `bra`s to labels not seen before them.
    ahead: Vec<&'b str>,
    /// Whether a branch that is no forward `bra` came: the body may loop, and nothing more
    /// needs noting.
    back: bool,
}

impl<'b> Look<'b> {
    /// A look at `body` to come, with room for its labels and the branches to them: about one
    /// statement in sixteen is a label in the corpus (grown from empty, the set was rehashed
    /// and the list copied on their way to that).
    pub(super) fn for_body(body: &[Stmt<'_>]) -> Self {
        Look {
            seen: HashSet::with_capacity(body.len() / 16),
            ahead: Vec::with_capacity(body.len() / 16),
            back: false,
        }
    }

    /// Notes the label `l`, the next statement of the body.
    pub(super) fn label(&mut self, l: &'b str) {
        if !self.back {
            self.seen.insert(l);
        }
    }

    /// Notes the instruction `i`, the next statement of the body.
    pub(super) fn inst(&mut self, i: &'b Inst<'b>) {
        if self.back {
            return;
        }
        match i.op {
            Some(Opcode::Bra) => match i.operands.first() {
                Some(Operand::Name(l)) if !self.seen.contains(l.as_ref()) => self.ahead.push(l),
                // Behind it, or no label at all (`Cfg::new` reads that as a back-edge).
                _ => self.back = true,
            },
            // Through a table: not followed here.
            Some(Opcode::Brx) => self.back = true,
            _ => {}
        }
    }

    /// Whether the body noted so far (all of it) may loop: a branch back, or to a label the
    /// body lacks (a branch to an unknown place, which `Cfg::new` counts as a loop).
    pub(super) fn may_loop(&self) -> bool {
        self.back || self.ahead.iter().any(|l| !self.seen.contains(l))
    }
}

#[cfg(test)]
mod tests {
    use super::super::bounded::Cfg;
    use super::super::hash::HashMap;
    use super::may_loop;

    /// Whether a body of these lines has back-edges, as the laid-out control flow says, and as
    /// the quick look says.
    fn both(lines: &str) -> (bool, bool) {
        let text = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{{\n\
             .reg .pred %p<3>;\n{lines}\nret;\n}}\n"
        );
        let m = crate::parse::parse(&crate::lex::lex(&text).unwrap()).unwrap();
        let body = m.funcs[0].body.as_deref().unwrap();
        let full = !Cfg::laid_out(body, &HashMap::default()).back.is_empty();
        (full, may_loop(body))
    }

    #[test]
    fn no_back_edge_is_missed() {
        let cases = [
            ("@%p1 bra L1;\nL1:\nbra.uni L2;\nL2:", false),
            ("L1:\n@%p1 bra L1;", true),
            ("@%p1 bra L9;", true),
            ("L1:\n{\n@%p1 bra L1;\n}", true),
            ("{\n@%p1 bra L2;\n}\nL2:", false),
            // Named twice: `Cfg::new` counts the last, so this one is forward (the look says
            // it may loop, which only costs the layout).
            ("L1:\n@%p1 bra L1;\nL1:", false),
        ];
        for (lines, loops) in cases {
            let (full, quick) = both(lines);
            assert_eq!(full, loops, "{lines}");
            assert!(quick || !full, "{lines}");
        }
    }
}
