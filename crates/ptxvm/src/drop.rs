//! Dropping a parsed module without a walk over every statement. Most statements own nothing
//! (an instruction's names borrow the source text, and its lists are inline): dropping each
//! still matched its kind and tested every name and operand, some 140 instructions a statement
//! and 4.4% of a sandbox rewrite (issue #9). The parser notes the few statements of a body that
//! do own memory (`Func::heap_stmts`: declarations, blocks, jump tables, an instruction with a
//! vector operand or a list past its inline slots); [`Module::drop_lean`] drops those and frees
//! the rest as one block. A pass that changes a body forgets its note, and that body is
//! dropped statement by statement as before. Were a note ever wrong, a statement it left out
//! would leak its memory, never free it twice: tests check in debug builds that it is not.

use crate::ast::{Module, Stmt, Str};
use crate::small::Item;

impl Module<'_> {
    /// Drops the module, each body with a note (`Func::heap_stmts`) through it.
    pub(crate) fn drop_lean(mut self) {
        for f in &mut self.funcs {
            if let Some(heap) = f.heap_stmts.take()
                && let Some(body) = f.body.take()
            {
                drop_body(body, &heap);
            }
        }
    }
}

/// Drops `body`'s statements at `heap` (ascending indices), then its buffer without a look at
/// the other statements, which own nothing.
fn drop_body(mut body: Vec<Stmt<'_>>, heap: &[u32]) {
    // A note that does not fit the body (never made so) is not trusted: every statement is
    // dropped as usual.
    let fits = heap.windows(2).all(|w| w[0] < w[1])
        && heap.last().is_none_or(|&k| (k as usize) < body.len());
    if !fits {
        return;
    }
    for &k in heap {
        if let Some(s) = body.get_mut(k as usize) {
            drop(std::mem::replace(s, Stmt::Label(Str::borrowed(""), 0)));
        }
    }
    debug_assert!(
        body.iter().all(owns_nothing),
        "a statement that owns memory is missing from its body's note"
    );
    // SAFETY: a length of 0 is within the capacity and asks no element to be initialised.
    // The statements past it are never dropped: they own nothing (above), so nothing leaks,
    // and the buffer is freed as the vector drops. (Forgotten one by one instead, each was
    // still read: a third of what dropping them cost.)
    unsafe { body.set_len(0) };
}

/// The note (`Func::heap_stmts`) of a body a pass rebuilt: its statements that own memory.
pub(crate) fn heap_stmts(body: &[Stmt<'_>]) -> Vec<u32> {
    (0u32..)
        .zip(body)
        .filter_map(|(k, s)| (!owns_nothing(s)).then_some(k))
        .collect()
}

/// `note` kept true of its body once the statements at `gone` (ascending indices) are removed:
/// each noted statement moves up by those removed before it, and a noted one removed is gone.
pub(crate) fn removed(note: &mut Vec<u32>, gone: &[usize]) {
    let mut before = 0;
    note.retain_mut(|k| {
        while gone.get(before).is_some_and(|&g| g < *k as usize) {
            before += 1;
        }
        if gone.get(before) == Some(&(*k as usize)) {
            return false;
        }
        *k -= before as u32;
        true
    });
}

/// A body's note made again as a pass rebuilds it in order from the old body's statements,
/// moved (their entries carried over, not looked at again: a look at every statement cost as
/// much as the drop it spares) and new ones (looked at).
pub(crate) struct Renote<'n> {
    old: std::iter::Peekable<std::iter::Copied<std::slice::Iter<'n, u32>>>,
    pub(crate) note: Vec<u32>,
}

impl<'n> Renote<'n> {
    /// From the old body's note.
    pub(crate) fn new(old: &'n [u32]) -> Self {
        Renote {
            old: old.iter().copied().peekable(),
            note: Vec::with_capacity(old.len() + 16),
        }
    }

    /// The old body's statements `from..from + n`, moved unchanged to `to..to + n` of the new
    /// one. Moves come in order of both; old entries skipped over are dropped.
    pub(crate) fn moved(&mut self, from: usize, to: usize, n: usize) {
        while let Some(k) = self.old.next_if(|&k| (k as usize) < from + n) {
            if let Some(d) = (k as usize).checked_sub(from) {
                self.note.push((to + d) as u32);
            }
        }
    }

    /// The new body's statements at `range`, made or changed by the pass: looked at.
    pub(crate) fn made(&mut self, body: &[Stmt<'_>], range: std::ops::Range<usize>) {
        let start = range.start;
        for (k, s) in body.get(range).unwrap_or_default().iter().enumerate() {
            if !owns_nothing(s) {
                self.note.push((start + k) as u32);
            }
        }
    }
}

/// Whether dropping `s` would free nothing.
pub(crate) fn owns_nothing(s: &Stmt<'_>) -> bool {
    match s {
        Stmt::Label(l, _) => l.owns_nothing(),
        Stmt::Inst(i) => {
            i.guard.as_ref().is_none_or(|(g, _)| g.owns_nothing())
                && i.opcode.owns_nothing()
                && i.mods.owns_nothing()
                && i.operands.owns_nothing()
        }
        Stmt::Reg { .. } | Stmt::Var(_) | Stmt::Targets(..) | Stmt::Block(_) => false,
    }
}

#[cfg(test)]
mod tests {
    /// A note shifted past removed statements names the same statements as before, less those
    /// removed.
    #[test]
    fn a_note_follows_its_statements_past_removed_ones() {
        let mut note = vec![0, 2, 3, 7, 9];
        super::removed(&mut note, &[1, 3, 8]);
        // 0 stays; 2 moves up by one (1 removed); 3 is removed; 7 moves up by two; 9 by three.
        assert_eq!(note, [0, 1, 5, 6]);
    }
}
