//! A quick look for back-edges: most functions have no loop, and seeing that from their labels
//! and branches costs a fraction of laying out their control flow (`Cfg::new`, which version.rs
//! and the allow-list each ask for every body).

use super::hash::HashSet;
use crate::ast::{Operand, Stmt};
use crate::isa::Opcode;

/// Whether `body` may have a back-edge (`Cfg::back`): false only when every branch is a `bra`
/// to a label that comes after it, nested blocks included. A label named twice counts where it
/// comes last, as in `Cfg::new`: one seen before the branch counts as behind it (only ever an
/// answer of "may loop", which lays out the flow).
pub(super) fn may_loop(body: &[Stmt<'_>]) -> bool {
    fn walk<'b>(
        body: &'b [Stmt<'b>],
        seen: &mut HashSet<&'b str>,
        ahead: &mut Vec<&'b str>,
    ) -> bool {
        for s in body {
            match s {
                Stmt::Label(l, _) => {
                    seen.insert(l.as_ref());
                }
                Stmt::Inst(i) => match i.op {
                    Some(Opcode::Bra) => match i.operands.first() {
                        Some(Operand::Name(l)) if !seen.contains(l.as_ref()) => ahead.push(l),
                        // Behind it, or no label at all (`Cfg::new` reads that as a back-edge).
                        _ => return true,
                    },
                    // Through a table: not followed here.
                    Some(Opcode::Brx) => return true,
                    _ => {}
                },
                Stmt::Block(b) if walk(b, seen, ahead) => return true,
                _ => {}
            }
        }
        false
    }
    let (mut seen, mut ahead) = (HashSet::default(), Vec::new());
    // A label the body lacks is a branch to an unknown place: `Cfg::new` counts it as a loop.
    walk(body, &mut seen, &mut ahead) || ahead.iter().any(|l| !seen.contains(l))
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
