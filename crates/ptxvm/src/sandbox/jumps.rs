//! Jump tables (`brx.idx` through a `.branchtargets` table): the index is clamped to the table
//! and a clamped jump reported as a fenced access, and the jump becomes a binary search of
//! compares and branches rather than a `brx.idx` (which NVIDIA's JIT ran wrong, below).

use super::print::O;
use super::rewrite::{Fx, R, imm, sreg};
use crate::ast::{Inst, Operand, Stmt, Str};
use crate::error::Error;

impl<'m> Fx<'_, 'm> {
    /// `brx.idx index, table`: a back-edge when the table names an earlier label (then polled,
    /// as `bra`), and always with its index clamped to the table's last entry. Past its table
    /// an index is undefined on NVIDIA (a jump through whatever follows the table, past every
    /// fence) and a fault on ptxvm; clamped, it takes the last target and is reported as a
    /// fenced access.
    ///
    /// The jump itself becomes a search tree of compares and branches ([`Self::jump_tree`]),
    /// not a `brx.idx`: NVIDIA's JIT at -O2 and above ran two rewritten generated programs'
    /// `brx.idx` wrong on the H200 (seed 57 in session 28, a wrong arm taken; seed 3016 in
    /// session 29, a legal store reported fenced in a table's target), and right at -O0 and
    /// -O1; the same programs with compares and branches in the jump's place were right at
    /// every level (bench/h200-runs/2026-12-04-s29/seed3016).
    pub(super) fn jump_table(&mut self, i: &'m Inst<'m>, out: &mut Vec<O<'m>>) -> R<()> {
        let table = match i.operands.get(1) {
            Some(Operand::Name(t)) => self.tables.get(t.as_ref()).copied(),
            _ => None,
        };
        let (Some(targets), Some(index)) = (table.filter(|ls| !ls.is_empty()), i.operands.first())
        else {
            return Err(Error::Refused {
                line: i.line,
                what: "`brx.idx` without a non-empty `.branchtargets` table of this function; \
                       declare the table in the function that jumps through it"
                    .into(),
            });
        };
        let back = targets
            .iter()
            .any(|l| self.labels.get(l.as_ref()).is_some_and(|&p| p <= self.pos));
        let (guard, stop) = match back.then(|| self.backedge(i, out)).flatten() {
            Some((copy, stop)) => (Some(copy), Some(stop)),
            None => (i.guard.clone(), None),
        };
        let last = imm(targets.len() as i64 - 1);
        let past = [sreg("p"), index.clone(), last];
        self.setp_under(out, ["gt", "u32"], past, guard.as_ref());
        self.fault(out, Some(("%__sbx_p".into(), false)));
        // A thread the guard holds back goes on after the jump, as past a guarded `brx.idx`.
        let over = guard.map(|(g, neg)| {
            let over = self.label();
            let to = [Operand::Name(over.clone().into())];
            self.emit(out, Some((g, !neg)), "bra", &[], &to);
            over
        });
        self.jump_tree(out, index, targets, 0);
        // A thread stopped at the poll leaves as one the guard holds back does; the tree ends
        // in a branch, so nothing falls into its stop path.
        if let Some(stop) = stop {
            self.leave_loop(stop, false, out);
        }
        if let Some(over) = over {
            out.push(O::new(Stmt::Label(over.into(), self.line)));
        }
        Ok(())
    }

    /// Branches to `targets[index - base]`, or to the last target for any index past them: a
    /// binary search (`index >= base + half` takes the upper half), so a table of n entries
    /// costs about log2(n) compares and its code grows linearly with the table.
    fn jump_tree(
        &mut self,
        out: &mut Vec<O<'m>>,
        index: &Operand<'m>,
        targets: &[Str<'m>],
        base: usize,
    ) {
        let half = targets.len() / 2;
        if half == 0 {
            if let Some(t) = targets.first() {
                self.emit(out, None, "bra", &[], &[Operand::Name(t.clone())]);
            }
            return;
        }
        let upper = self.label();
        let at = imm((base + half) as i64);
        self.emit(
            out,
            None,
            "setp",
            &["ge", "u32"],
            &[sreg("p"), index.clone(), at],
        );
        let p = Some(("%__sbx_p".into(), false));
        self.emit(out, p, "bra", &[], &[Operand::Name(upper.clone().into())]);
        self.jump_tree(out, index, &targets[..half], base);
        out.push(O::new(Stmt::Label(upper.into(), self.line)));
        self.jump_tree(out, index, &targets[half..], base + half);
    }
}
