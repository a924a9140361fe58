//! Where an entry compares the abort epoch it read at entry (`Fx::entry_check`): a forward
//! "checked on every path" walk puts the compare before the first statement with an effect that
//! could outlive a stale launch on each path, so that the epoch load's latency overlaps the
//! kernel's own first work; and before a loop rather than in it when the effect is inside one.

use super::hash::HashSet;

use super::print::O;
use super::rewrite::Fx;
use crate::ast::{Operand, Stmt};
use crate::isa::{Family, Opcode, Sandbox};

/// The walk's state in one entry.
#[derive(Default)]
pub(super) struct Deferral<'m> {
    /// Whether every path to here passed an epoch check; the labels that a branch reaches
    /// before one; the labels passed before one (a back-edge to them needs no compare).
    checked: bool,
    unchecked_targets: HashSet<&'m str>,
    unchecked_labels: HashSet<&'m str>,
    /// Every loop header's position and its last back-edge's, by header; how many of them the
    /// walk has passed (`Fx::hoists_check`).
    heads: Vec<(usize, usize)>,
    passed_heads: usize,
    /// Where `Fx::loop_needs_check` stopped: a position, and the statements from there on at
    /// its level. Every position from the scan's start to there was one the compare may
    /// precede.
    scanned: (usize, &'m [Stmt<'m>]),
}

impl<'m> Deferral<'m> {
    /// The state at an entry's start, its loops (`Info::loops`: back-edge, header) given.
    pub(super) fn new(loops: &[(usize, usize)]) -> Self {
        let mut heads: Vec<(usize, usize)> = loops
            .iter()
            .filter(|&&(b, h)| h <= b)
            .map(|&(b, h)| (h, b))
            .collect();
        // By header, its latest back-edge last in its run: the one `dedup` keeps after the
        // reversal.
        heads.sort_unstable();
        heads.reverse();
        heads.dedup_by_key(|&mut (h, _)| h);
        heads.reverse();
        Deferral {
            heads,
            ..Default::default()
        }
    }
}

impl<'m> Fx<'_, 'm> {
    /// The entry's epoch check, placed by a forward "checked on every path" analysis in one
    /// pass over the body: the compare goes right before a statement that is not side-effect
    /// free (a write that may reach global memory, a call, an async copy, a nested block: see
    /// `side_effect_free`) wherever some path reaches it unchecked. Branches and labels only
    /// move the analysis state:
    /// - a forward branch taken unchecked marks its target unchecked;
    /// - a back-edge taken unchecked needs no compare when its loop header was itself reached
    ///   unchecked (the header's state is then already "unchecked"), and gets one otherwise;
    /// - `exit` and `ret` end the thread, which an abort would do too;
    /// - a loop header reached unchecked by falling in only (no branch taken unchecked lands
    ///   there), whose loop holds a statement that would take the compare, gets it before the
    ///   header instead (`rest`: what follows `s` at its level): a compare in the loop ran on
    ///   every trip, and its `exit` kept ptxas from hoisting what the loop reads
    ///   (softmax_rows' second and third loops: ISOLATION.md, "Cost", session 39).
    ///
    /// The prologue's epoch load then overlaps whatever side-effect-free code (address
    /// arithmetic, loads, whole loops of loads: their back-edges poll on their own) precedes
    /// the first effect, instead of stalling the first branch.
    pub(super) fn defer_step(
        &mut self,
        s: &'m Stmt<'m>,
        rest: &'m [Stmt<'m>],
        out: &mut Vec<O<'m>>,
    ) {
        if let Stmt::Label(l, _) = s {
            let unchecked_target = self.defer.unchecked_targets.contains(l.as_ref());
            self.defer.checked &= !unchecked_target;
            // Reached unchecked only by falling in: a loop that needs the compare gets it here,
            // once per entry, rather than on every trip.
            if !self.defer.checked && !unchecked_target && self.hoists_check(rest) {
                self.compare_here(out);
                return;
            }
            if !self.defer.checked {
                // Room for every label at once: grown from empty, the set rehashed as it went.
                if self.defer.unchecked_labels.capacity() == 0 {
                    self.defer.unchecked_labels.reserve(self.labels.len());
                }
                self.defer.unchecked_labels.insert(l.as_ref());
            }
            return;
        }
        if self.defer.checked || side_effect_free(s) {
            return;
        }
        if let Stmt::Inst(i) = s {
            if matches!(i.opcode.as_ref(), "exit" | "ret") {
                return;
            }
            if i.opcode == "bra"
                && let Some(Operand::Name(l)) = i.operands.first()
                && let Some(&t) = self.labels.get(l.as_ref())
            {
                if t > self.pos {
                    // Room for every label at once, as for `unchecked_labels` below.
                    if self.defer.unchecked_targets.capacity() == 0 {
                        self.defer.unchecked_targets.reserve(self.labels.len());
                    }
                    self.defer.unchecked_targets.insert(l.as_ref());
                    return;
                }
                if self.defer.unchecked_labels.contains(l.as_ref()) {
                    return;
                }
            }
        }
        self.compare_here(out);
    }

    /// Places the compare here; every path on from here is checked.
    fn compare_here(&mut self, out: &mut Vec<O<'m>>) {
        // Only the kernel compares: its skip copy shares the body (`func`).
        out.push(O::Kernel(self.emitted(|fx, o| fx.entry_check(o))));
        self.defer.checked = true;
    }

    /// Whether the label at `self.pos` heads a loop holding a statement that would take the
    /// entry's compare (`rest`: what follows the label).
    fn hoists_check(&mut self, rest: &'m [Stmt<'m>]) -> bool {
        let h = self.pos;
        let d = &mut self.defer;
        while d.heads.get(d.passed_heads).is_some_and(|&(at, _)| at < h) {
            d.passed_heads += 1;
        }
        match d.heads.get(d.passed_heads) {
            Some(&(at, back)) if at == h => self.loop_needs_check(rest, h, back),
            _ => false,
        }
    }

    /// Whether positions `h + 1..=b` hold a statement that would take the entry's compare,
    /// scanning `rest` from position `h + 1`, or from where the last scan stopped when that is
    /// past `h`: headers come in order, so each statement is scanned once (a scan of each
    /// loop made nested loops quadratic). A nested block counts as such a statement (the walk
    /// compares before one), and so does running out of statements first (the loop ends past
    /// the block the scan began in): a compare too early is only one the thread did not need
    /// yet.
    fn loop_needs_check(&mut self, rest: &'m [Stmt<'m>], h: usize, b: usize) -> bool {
        let (mut pos, mut rest) = match self.defer.scanned {
            (at, more) if at > h => (at, more),
            _ => (h + 1, rest),
        };
        let mut found = true;
        while let Some((s, more)) = rest.split_first() {
            if pos > b {
                found = false;
                break;
            }
            match s {
                Stmt::Label(..) => pos += 1,
                Stmt::Inst(i)
                    if side_effect_free(s)
                        || matches!(i.opcode.as_ref(), "bra" | "exit" | "ret") =>
                {
                    pos += 1
                }
                Stmt::Inst(_) | Stmt::Block(_) => break,
                _ => {}
            }
            rest = more;
        }
        self.defer.scanned = (pos, rest);
        found && pos <= b
    }
}

/// Whether `s` may run before an entry has compared the abort epoch: what a stale launch may do
/// and still leave nothing behind once it ends. That is every instruction that writes only
/// registers (arithmetic, conversions, warp collectives, `mma` and `wmma.mma`), barriers, loads
/// (fenced; not volatile or acquire ones; `ldmatrix` and `wmma.load` among them), and stores,
/// atomics and reductions to the thread's `.local` or the block's `.shared` memory (a
/// `wmma.store` there too), which die with the launch. Not: a write, atomic or reduction that
/// may reach global memory (generic or `.global`), a call (its callee may), an async copy, a
/// branch (the analysis follows it) or a nested block. Until session 39 the tensor-core loads
/// counted as effects, so the compare and its `exit` landed inside every wmma k-loop, run on
/// each trip.
///
/// The later the compare, the more of the epoch load's latency the kernel's own work hides. On
/// the H200 the load itself then costs short kernels at most 0.15 µs; what they pay is the
/// loops' polls (bench/h200-runs/2026-12-02-s9/sandbox-polls/).
fn side_effect_free(s: &Stmt) -> bool {
    let i = match s {
        Stmt::Inst(i) => i,
        Stmt::Reg { .. } | Stmt::Var(_) => return true,
        _ => return false,
    };
    let Some(op) = i.op else {
        return false;
    };
    let private = || {
        i.mods
            .iter()
            .any(|m| m == "local" || m.starts_with("shared"))
    };
    match (op, op.family()) {
        (_, Family::Arith | Family::Collective) => !matches!(op.sandbox(), Sandbox::Refuse(_)),
        (Opcode::Bar | Opcode::Barrier, _) => true,
        (Opcode::Ld | Opcode::Ldu, _) => !i
            .mods
            .iter()
            .any(|m| m == "volatile" || m.starts_with("acquire")),
        (Opcode::St | Opcode::Atom | Opcode::Red, _) => private(),
        (Opcode::Ldmatrix, _) => true,
        (Opcode::Wmma, _) => !i.mods.iter().any(|m| m == "store") || private(),
        _ => false,
    }
}
