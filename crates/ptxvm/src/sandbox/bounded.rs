//! Loops that need no abort poll. A back-edge is taken at most B times per entry into its loop
//! when the loop is innermost (no other back-edge inside), entered only at its header, calls
//! nothing that can loop (lean device functions have no back-edge: a back-edge polls, and a poll
//! reads a hidden value), and its branch is taken only while a counter moves toward a bound:
//! - **counted**: `iv < C` (unsigned, `C` an immediate) where `iv`'s one write in the loop is
//!   `add iv, iv, k` (k >= 1) in the branch's basic block: the checked values then grow by k
//!   per iteration, so B <= C/k + 2 even across wrap-around;
//! - **halving**: `iv != 0` (or `iv > 0`, `iv >= 1`) where `iv`'s one write in the loop is a
//!   logical `shr iv, iv, s` (s >= 1) in the branch's basic block: B <= bits/s + 2 (tree
//!   reductions: `for (s = n / 2; s > 0; s >>= 1)`);
//! - **versioned**: the fast copy of a loop whose bound or step is only known at run time,
//!   entered after a check that it takes fewer than `poll_interval` back-edges (version.rs):
//!   counted loops with a register bound or step, and **count-down** loops, whose branch is
//!   taken while `iv != C` (`setp.ne` and `@p`, or `setp.eq` and `@!p`) with `iv += k` as above
//!   (k of either sign; nvcc's rotated loops: `add r, r, -2; setp.ne r, 0`). Those end after
//!   any number of back-edges up to 2^bits, so only a check at entry can bound them.
//!
//! Such a loop with B <= poll_interval (`collatz_steps`' `i < 1000`) runs as nvcc wrote it; the
//! instrumented back-edge of each loop around it counts its B back-edges as well as its own, so a
//! thread still polls after at most about `poll_interval` back-edges (plus a constant: each
//! bounded loop's last run before its enclosing back-edge is charged). A versioned fast copy
//! inside another loop has no useful static B (its check admits up to `poll_interval - 1`): it
//! is charged where it is entered instead, by the bound its check computed for that entry
//! (version.rs, `Copies::charged`), and counts nothing at the enclosing back-edge. With no
//! loop around it, and more such loops in the function than a few polls' worth, the loop
//! counts its B back-edges itself where it ends (`BackEdges::charge`).

use super::hash::{HashMap, HashMapExt, HashSet};

use super::allow::call_parts;
use super::forward::may_loop;
use super::group::{writes, writes_any};
use super::minmax::MinMaxTree;
use super::names::same;
use crate::ast::{Inst, Operand, Stmt, Str};
use crate::isa::Opcode;
use crate::small::Small;

/// What the rewrite does at a back-edge, by instruction.
#[derive(Default)]
pub(crate) struct BackEdges<'m> {
    /// Back-edges of bounded loops: no poll.
    pub bounded: HashSet<*const Inst<'m>>,
    /// Instrumented back-edges that stand for more than one back-edge: how many.
    pub weight: HashMap<*const Inst<'m>, u32>,
    /// Back-edges of bounded loops that no loop encloses, with the loop's bound, in a function
    /// whose such loops together may take more than [`UNCOUNTED_AT_TOP`] polls' worth of
    /// back-edges: nothing else counts their iterations, so the thread counts them (and may
    /// poll) where the loop ends, after the back-edge. Such a loop is left only there (one with
    /// another way out is not bounded): else a function of many of them in a row ran up to
    /// `poll_interval` iterations each, unpolled.
    pub charge: HashMap<*const Inst<'m>, u32>,
}

/// A label (its name and position are in `flatten`'s marks) or an instruction.
pub(crate) enum Item<'m> {
    Label,
    Inst(&'m Inst<'m>),
}

/// A loop's limit or step: an immediate or a register the loop does not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Val<'m> {
    Imm(i64),
    Reg(&'m str),
}

/// What a counted loop's back-edge is taken only while: `iv < limit` (`<=` with `le`), or
/// `iv != limit` (a count-down loop: bounded only by a check at entry, version.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Test {
    Below { le: bool, signed: bool },
    Ne,
}

/// How a loop's back-edge is bounded (see the module's header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Counter<'m> {
    /// Taken only while `test` holds of `iv` and `limit`, `iv += step` (`bits` wide) once per
    /// iteration.
    Counted {
        iv: &'m str,
        limit: Val<'m>,
        step: Val<'m>,
        test: Test,
        bits: u32,
    },
    /// Taken only while `iv != 0`, `iv >>= shift` (logical) once per iteration.
    Halving { bits: u32, shift: u32 },
}

impl Counter<'_> {
    /// B, when it follows from the loop's text alone.
    fn static_bound(&self) -> Option<u64> {
        match *self {
            Counter::Counted {
                limit: Val::Imm(c),
                step: Val::Imm(k),
                test: Test::Below { le, signed: false },
                ..
            } if c >= 0 && k >= 1 => {
                Some((c as u64).checked_add(u64::from(le))?.div_ceil(k as u64) + 2)
            }
            Counter::Halving { bits, shift } => Some(u64::from(bits / shift) + 2),
            Counter::Counted { .. } => None,
        }
    }
}

/// A function body's control flow, flattened: statement positions as `analyse` counts them.
pub(crate) struct Cfg<'m> {
    pub items: Vec<Item<'m>>,
    /// Each item's index in the body's own statement list; `None` inside a nested block.
    pub top: Vec<Option<usize>>,
    /// Every back-edge: (branch position, header position; 0 when unknown), by position.
    pub back: Vec<(usize, usize)>,
    /// The first and last branch whose targets are unknown (it may land anywhere), if any.
    unknown: Option<(usize, usize)>,
    /// Every branch by position, with its lowest and highest target (`None`: unknown).
    spans: Vec<(usize, Option<(usize, usize)>)>,
    /// By target position, the first and last branch landing there: whether a loop is entered
    /// from outside is a range query, not a walk over every branch of the body (which, per
    /// back-edge, made a hostile body of 110k instructions take a second to rewrite).
    sources: MinMaxTree,
}

/// Where `flatten` found the body's labels and branches, in order: the passes that need them
/// look at these, not at every item again.
#[derive(Default)]
struct Marks<'m> {
    labels: Vec<(&'m str, usize)>,
    branches: Vec<usize>,
}

fn flatten<'m>(body: &'m [Stmt<'m>], nested: bool, cfg: &mut Cfg<'m>, marks: &mut Marks<'m>) {
    for (k, s) in body.iter().enumerate() {
        let item = match s {
            Stmt::Label(l, _) => {
                marks.labels.push((l, cfg.items.len()));
                Item::Label
            }
            Stmt::Inst(i) => {
                // `op` is `opcode` looked up (the parser sets both): no names compared.
                if matches!(i.op, Some(Opcode::Bra | Opcode::Brx)) {
                    marks.branches.push(cfg.items.len());
                }
                Item::Inst(i)
            }
            Stmt::Block(b) => {
                flatten(b, true, cfg, marks);
                continue;
            }
            _ => continue,
        };
        cfg.items.push(item);
        cfg.top.push((!nested).then_some(k));
    }
}

impl<'m> Cfg<'m> {
    /// The control flow of a whole function body, with the branch tables it declares.
    pub(crate) fn of(body: &'m [Stmt<'m>]) -> Self {
        Cfg::of_looked(body, may_loop(body))
    }

    /// [`Cfg::of`], given whether `body` may loop (`forward::may_loop`, or a [`Look`] taken
    /// in another walk over it).
    ///
    /// [`Look`]: super::forward::Look
    pub(crate) fn of_looked(body: &'m [Stmt<'m>], may_loop: bool) -> Self {
        if !may_loop {
            return Cfg::forward();
        }
        let mut found = HashMap::new();
        tables(body, &mut found);
        Cfg::laid_out(body, &found)
    }

    /// Whether the body has no loop: every branch of it goes forward, to a label it names (a
    /// `brx` through a table it declares). Loop versioning's copies count as loops.
    pub(crate) fn forward_only(&self) -> bool {
        self.back.is_empty()
    }
}

impl Cfg<'_> {
    /// The control flow of a body without back-edges, as far as anything asks: every question
    /// (`counter`, `analyse`, version.rs's plans) starts from a back-edge, so the positions,
    /// spans and tree are left empty rather than laid out for nothing.
    fn forward() -> Self {
        Cfg {
            items: Vec::new(),
            top: Vec::new(),
            back: Vec::new(),
            unknown: None,
            spans: Vec::new(),
            sources: MinMaxTree::default(),
        }
    }
}

/// The branch tables (`.branchtargets`) `body` declares, nested blocks included.
fn tables<'m>(body: &'m [Stmt<'m>], out: &mut HashMap<&'m str, &'m [Str<'m>]>) {
    for s in body {
        match s {
            Stmt::Targets(name, labels, _) => {
                out.insert(name.as_ref(), labels.as_slice());
            }
            Stmt::Block(b) => tables(b, out),
            _ => {}
        }
    }
}

/// Where a branch may jump: one place for nearly all (inline, no allocation).
type Targets = Small<usize, 1>;

/// Positions a branch may jump to; `None` when unknown (a `brx` whose table is not found).
fn targets(
    i: &Inst,
    labels: &HashMap<&str, usize>,
    tables: &HashMap<&str, &[Str<'_>]>,
) -> Option<Targets> {
    let names: Vec<&str> = match i.opcode.as_ref() {
        // One target, looked up without a list of names.
        "bra" => match i.operands.first() {
            Some(Operand::Name(l)) => return labels.get(l.as_ref()).map(|&k| [k].into()),
            _ => return None,
        },
        "brx" => match i.operands.get(1) {
            Some(Operand::Name(t)) => tables.get(t.as_ref())?.iter().map(|l| l.as_ref()).collect(),
            _ => return None,
        },
        _ => return Some(Targets::new()),
    };
    names.iter().map(|n| labels.get(n).copied()).collect()
}

/// What a loop's closing compare checks: `iv < limit` (or `<=`), `iv != limit`, or `iv != 0`.
enum Cmp<'m> {
    Counted {
        iv: &'m str,
        limit: Val<'m>,
        test: Test,
        bits: u32,
    },
    NonZero {
        iv: &'m str,
        bits: u32,
    },
}

fn val<'m>(o: &'m Operand<'_>) -> Option<Val<'m>> {
    match o {
        Operand::Name(r) => Some(Val::Reg(r)),
        Operand::Int(k) => Some(Val::Imm(*k)),
        _ => None,
    }
}

/// What `setp` `i` makes `p` true only for (combined with `.and`, read with `p` true):
/// `setp.lt|le.{u,s}{32,64} p, iv, C`, `setp.ne p, iv, C`, or `iv > 0`, `iv >= 1`. Read with
/// `p` false (`negated`, a branch on `@!p`): only a plain `setp.eq p, iv, C`, which is `p`
/// false only for `iv != C` (with `.and q`, `p` is false for any `iv` when `q` is).
fn compare_of<'m>(i: &'m Inst<'m>, p: &str, negated: bool) -> Option<Cmp<'m>> {
    if i.opcode != "setp" || i.guard.is_some() {
        return None;
    }
    let has = |m: &str| i.mods.iter().any(|x| x == m);
    if has("or") || has("xor") || (negated && (has("and") || !has("eq"))) {
        return None;
    }
    let (bits, signed) = i.mods.iter().find_map(|m| match m.as_ref() {
        "u32" | "b32" => Some((32, false)),
        "s32" => Some((32, true)),
        "u64" | "b64" => Some((64, false)),
        "s64" => Some((64, true)),
        _ => None,
    })?;
    let first = match i.operands.first()? {
        Operand::Name(n) => n,
        Operand::Pair(p) => &p.0,
        _ => return None,
    };
    let Operand::Name(iv) = i.operands.get(1)? else {
        return None;
    };
    if first != p {
        return None;
    }
    let rhs = val(i.operands.get(2)?)?;
    let cmp = |c: &str| has(c);
    let test = if cmp(if negated { "eq" } else { "ne" }) {
        Some(Test::Ne)
    } else if cmp("lt") || cmp("le") {
        Some(Test::Below {
            le: cmp("le"),
            signed,
        })
    } else {
        None
    };
    if let Some(test) = test {
        // `iv != iv` and `iv < iv` are never true: no loop, and no bound to check.
        return (rhs != Val::Reg(iv)).then_some(Cmp::Counted {
            iv,
            limit: rhs,
            test,
            bits,
        });
    }
    let nonzero = matches!(
        (rhs, cmp("gt"), cmp("ge")),
        (Val::Imm(0), true, _) | (Val::Imm(1), _, true)
    );
    nonzero.then_some(Cmp::NonZero { iv, bits })
}

/// The longest loop, in statements from its header to its back-edge, that [`Cfg::counter`] tries
/// to prove bounded.
const MAX_COUNTED_SPAN: usize = 1024;

impl<'m> Cfg<'m> {
    pub(crate) fn new(body: &'m [Stmt<'m>], tables: &HashMap<&str, &[Str<'_>]>) -> Self {
        if !may_loop(body) {
            return Cfg::forward();
        }
        Cfg::laid_out(body, tables)
    }

    /// [`Cfg::new`], every position laid out.
    pub(super) fn laid_out(body: &'m [Stmt<'m>], tables: &HashMap<&str, &[Str<'_>]>) -> Self {
        let mut cfg = Cfg {
            items: Vec::with_capacity(body.len()),
            top: Vec::with_capacity(body.len()),
            back: Vec::new(),
            unknown: None,
            spans: Vec::new(),
            sources: MinMaxTree::default(),
        };
        // Sized for a label or branch every few statements: grown from empty, they were
        // reallocated several times per function.
        let mut marks = Marks {
            labels: Vec::with_capacity(body.len() / 4 + 4),
            branches: Vec::with_capacity(body.len() / 4 + 4),
        };
        flatten(body, false, &mut cfg, &mut marks);
        // Sized once: collecting from a filter grew (and rehashed) the map as it went.
        let mut labels: HashMap<&str, usize> = HashMap::with_capacity(marks.labels.len());
        for &(l, k) in &marks.labels {
            labels.insert(l, k);
        }
        // Sized once: collected from a filter, it grew from empty.
        let mut branches: Vec<(usize, Option<Targets>)> = Vec::with_capacity(marks.branches.len());
        branches.extend(
            marks
                .branches
                .iter()
                .filter_map(|&k| match cfg.items.get(k) {
                    Some(Item::Inst(i)) => Some((k, targets(i, &labels, tables))),
                    _ => None,
                }),
        );
        cfg.back = branches
            .iter()
            .filter_map(|(k, t)| match t {
                None => Some((*k, 0)),
                Some(t) => t
                    .iter()
                    .copied()
                    .filter(|&x| x <= *k)
                    .min()
                    .map(|m| (*k, m)),
            })
            .collect();
        cfg.spans = branches
            .iter()
            .map(|(k, t)| {
                let span = t.as_ref().and_then(|t| {
                    let lo = t.iter().copied().min()?;
                    Some((lo, t.iter().copied().max().unwrap_or(lo)))
                });
                (*k, span)
            })
            .collect();
        // Only `counter` asks the tree, and only of a back-edge: a body without one (most
        // functions) needs none.
        let mut sources = MinMaxTree::new(if cfg.back.is_empty() {
            0
        } else {
            cfg.items.len()
        });
        for (k, t) in &branches {
            match t {
                None => {
                    let (first, _) = cfg.unknown.unwrap_or((*k, *k));
                    cfg.unknown = Some((first, *k));
                }
                Some(t) => t.iter().for_each(|&x| sources.note(x, *k)),
            }
        }
        sources.build();
        cfg.sources = sources;
        cfg
    }

    /// Whether the loop `[h, b]` is short enough for [`Cfg::counter`] to try (`MAX_COUNTED_SPAN`):
    /// a caller that walks a loop's body before asking can skip the longer ones first.
    pub(crate) fn provable((h, b): (usize, usize)) -> bool {
        b.saturating_sub(h) <= MAX_COUNTED_SPAN
    }

    /// The instructions strictly inside the loop `[h, b]`.
    pub(crate) fn body(&self, (h, b): (usize, usize)) -> impl Iterator<Item = &'m Inst<'m>> + '_ {
        // Empty for `h == b` (a branch to an unknown target at position 0: see `counter`).
        let inside = self.items.get(h + 1..b).unwrap_or_default();
        inside.iter().filter_map(|it| match it {
            Item::Inst(j) => Some(*j),
            Item::Label => None,
        })
    }

    /// How the back-edge `i` (at `b`, to the header at `h`) is bounded, if its loop has one of
    /// the shapes of the module's header; `call_ok` says which calls in the loop are harmless.
    pub(crate) fn counter(
        &self,
        (h, b): (usize, usize),
        i: &'m Inst<'m>,
        call_ok: &dyn Fn(&Inst) -> bool,
    ) -> Option<Counter<'m>> {
        // A back-edge whose target is unknown counts from position 0: a branch there (a
        // guarded `bra` to a label the body lacks, before the allow-list refuses it) is no loop.
        if i.opcode != "bra" || h >= b {
            return None;
        }
        let &(ref p, neg) = i.guard.as_ref()?;
        // The proof walks the loop's body a few times: past this span it is not tried, and the
        // loop is polled as an unbounded one (a poll is nothing beside a body that long), so a
        // body of thousands of nested loops costs linear time, not quadratic (2,000 nested loops
        // in 250 KB of text took 259M instructions to rewrite, 8,000 in 1 MB 0.94 s; with the
        // bound, 78M and 0.07 s).
        if !Self::provable((h, b)) {
            return None;
        }
        // No other back-edge inside: `back` is by position, so the first one past the header
        // is the only one to look at.
        let next_back = self.back.partition_point(|&(k, _)| k <= h);
        if self.back.get(next_back).is_some_and(|&(k, _)| k < b) {
            return None;
        }
        // Entered only at its header: no branch from outside lands inside, and none that may
        // land anywhere lies outside.
        if self
            .unknown
            .is_some_and(|(first, last)| first < h || last > b)
        {
            return None;
        }
        if let Some((first, last)) = self.sources.range(h + 1, b + 1)
            && (first < h || last > b)
        {
            return None;
        }
        if self.body((h, b)).any(|j| j.opcode == "call" && !call_ok(j)) {
            return None;
        }
        // The branch's basic block: from the last label before it.
        let start = (h..b)
            .rev()
            .find(|&k| matches!(self.items[k], Item::Label))
            .unwrap_or(h);
        // Sized once (at most the items it is taken from): collected from a filter, it grew.
        let inside = &self.items[start + 1..b];
        let mut block: Vec<&Inst> = Vec::with_capacity(inside.len());
        block.extend(inside.iter().filter_map(|it| match it {
            Item::Inst(j) => Some(*j),
            Item::Label => None,
        }));
        let last_def = |before: usize, reg: &str| {
            block[..before]
                .iter()
                .rposition(|j| writes(j, reg))
                .map(|k| (k, block[k]))
        };
        let (kp, def) = last_def(block.len(), p)?;
        let cmp = match compare_of(def, p, neg) {
            Some(x) => x,
            // `and p, a, b` is true only when `a` is (false whenever either is: no bound read
            // with `p` false).
            None if def.opcode == "and" && def.guard.is_none() && !neg => {
                let ops = [def.operands.get(1)?, def.operands.get(2)?];
                ops.iter().find_map(|o| match o {
                    Operand::Name(a) => last_def(kp, a).and_then(|(_, d)| compare_of(d, a, false)),
                    _ => None,
                })?
            }
            None => return None,
        };
        let iv = match cmp {
            Cmp::Counted { iv, .. } | Cmp::NonZero { iv, .. } => iv,
        };
        // iv's one write in the loop, in the branch's block; registers the check reads at
        // entry must keep their value through the loop.
        let mut writers = self.body((h, b)).filter(|j| writes(j, iv));
        let upd = writers.next()?;
        // Whether neither of `vs` is iv or a register the loop writes: one walk of the loop
        // for both, not one each.
        let fixed = |vs: [&Val<'_>; 2]| {
            let regs = vs.map(|v| match v {
                Val::Imm(_) => None,
                Val::Reg(r) => Some(*r),
            });
            if regs.contains(&Some(iv)) {
                return false;
            }
            let hit = |x: &str| regs.iter().flatten().any(|r| same(x, r));
            regs == [None, None] || !self.body((h, b)).any(|j| writes_any(j, hit))
        };
        if writers.next().is_some()
            || !block.iter().any(|j| std::ptr::eq(*j, upd))
            || upd.guard.is_some()
            || upd.mods.len() != 1
        {
            return None;
        }
        let width = match upd.mods[0].as_ref() {
            "u32" | "s32" | "b32" => 32,
            "u64" | "s64" | "b64" => 64,
            _ => return None,
        };
        let [Operand::Name(d), Operand::Name(s), step] = upd.operands.as_slice() else {
            return None;
        };
        if d != iv || s != iv {
            return None;
        }
        match cmp {
            Cmp::Counted {
                limit, test, bits, ..
            } if upd.opcode == "add" && width == bits && !upd.mods[0].starts_with('b') => {
                let step = val(step)?;
                fixed([&limit, &step]).then_some(Counter::Counted {
                    iv,
                    limit,
                    step,
                    test,
                    bits,
                })
            }
            Cmp::NonZero { bits, .. }
            | Cmp::Counted {
                limit: Val::Imm(0),
                test: Test::Ne,
                bits,
                ..
            } if upd.opcode == "shr" && width == bits && !upd.mods[0].starts_with('s') => {
                match step {
                    Operand::Int(k) if *k >= 1 && *k < i64::from(bits) => Some(Counter::Halving {
                        bits,
                        shift: *k as u32,
                    }),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Analyses one function body, `cfg`. `lean` names the device functions without back-edges;
/// `copies` the headers of versioned loops' copies (version.rs): a fast copy is entered only
/// after a check that it takes fewer than `poll_interval` back-edges, and an original is polled
/// as any loop its text does not bound.
pub(crate) fn analyse<'m>(
    cfg: &Cfg<'m>,
    lean: &HashSet<&str>,
    poll_interval: u32,
    copies: &super::version::Copies,
) -> BackEdges<'m> {
    let call_ok = |j: &Inst| call_parts(j).is_ok_and(|(c, _)| lean.contains(c));
    let mut out = BackEdges::default();
    let mut loops: Vec<(usize, usize, u64)> = Vec::new();
    for &(b, h) in &cfg.back {
        let Item::Inst(i) = cfg.items[b] else {
            continue;
        };
        let target = match i.operands.first() {
            Some(Operand::Name(l)) if i.opcode == "bra" => Some(l.as_ref()),
            _ => None,
        };
        let n = if target.is_some_and(|l| copies.charged.contains(l)) && cfg.enclosed((b, h)) {
            // Charged where it is entered, by its check's estimate (version.rs): nothing left
            // for the enclosing back-edge to count. Only where a back-edge of this body
            // encloses it, which then polls: at a function's top, with nothing after it to
            // poll, its bound must count towards what may go uncounted (below).
            Some(0)
        } else if target.is_some_and(|l| copies.fast.contains(l)) {
            Some(u64::from(poll_interval - 1))
        } else if target.is_some_and(|l| copies.slow.contains(l)) {
            // A versioned loop's original: versioned because its text does not bound it (a
            // bound counter's proof would fail again here).
            None
        } else {
            cfg.counter((h, b), i, &call_ok)
                .and_then(|c| c.static_bound())
        };
        if let Some(n) = n
            && n <= u64::from(poll_interval)
        {
            out.bounded.insert(i as *const Inst);
            loops.push((h, b, n));
        }
    }
    // Bounded loops no other loop encloses, when together they may run past what may go
    // uncounted: counted where they end, if that is their only way out; else instrumented like
    // any loop. All of them within it (most functions) need no look at which are enclosed.
    let budget = UNCOUNTED_AT_TOP * u64::from(poll_interval);
    if loops.iter().map(|l| l.2).sum::<u64>() <= budget {
        return weigh(cfg, out, &loops, poll_interval);
    }
    let others: Vec<(usize, usize)> = cfg
        .back
        .iter()
        .copied()
        .filter(|&(b, _)| match cfg.items[b] {
            Item::Inst(i) => !out.bounded.contains(&(i as *const Inst)),
            Item::Label => true,
        })
        .collect();
    let enclosed = looped(&others);
    let at_top = |h: usize| !enclosed.get(h).copied().unwrap_or(false);
    // Each runs at most once per call: a few of them together stay within a poll's worth.
    let uncounted: u64 = loops.iter().filter(|l| at_top(l.0)).map(|l| l.2).sum();
    if uncounted <= budget {
        return weigh(cfg, out, &loops, poll_interval);
    }
    loops.retain(|&(h, b, n)| {
        if !at_top(h) {
            return true;
        }
        let Item::Inst(i) = cfg.items[b] else {
            return true;
        };
        if cfg.leaves_only_at_its_back_edge((h, b)) {
            out.charge.insert(i as *const Inst, n.max(1) as u32);
            true
        } else {
            out.bounded.remove(&(i as *const Inst));
            false
        }
    });
    weigh(cfg, out, &loops, poll_interval)
}

/// How many polls' worth of back-edges a function's bounded loops that no loop encloses may
/// take in all, uncounted: each runs at most once per call, so a function of a few of them
/// (the corpus's kernels have up to three) is left as nvcc wrote it.
const UNCOUNTED_AT_TOP: u64 = 4;

/// Gives each instrumented back-edge the weight of the bounded loops inside its loop.
fn weigh<'m>(
    cfg: &Cfg<'m>,
    mut out: BackEdges<'m>,
    loops: &[(usize, usize, u64)],
    poll_interval: u32,
) -> BackEdges<'m> {
    for &(b, h) in &cfg.back {
        let Item::Inst(i) = cfg.items[b] else {
            continue;
        };
        if out.bounded.contains(&(i as *const Inst)) {
            continue;
        }
        let inner: u64 = loops
            .iter()
            .filter(|(lh, lb, _)| *lh >= h && *lb <= b)
            .map(|l| l.2)
            .sum();
        if inner > 0 {
            let w = (1 + inner).min(u64::from(poll_interval));
            out.weight.insert(i as *const Inst, w as u32);
        }
    }
    out
}

impl Cfg<'_> {
    /// Whether another loop of the body spans the loop from header `h` to back-edge `b`
    /// (back-edge `b`, header `h`, as `back` pairs them).
    pub(crate) fn enclosed(&self, (b, h): (usize, usize)) -> bool {
        self.back
            .iter()
            .any(|&(b2, h2)| (b2, h2) != (b, h) && h2 <= h && b2 >= b)
    }

    /// Whether the loop from header `h` to back-edge `b` is left only by falling through its
    /// back-edge: no branch inside it (nor one whose targets are unknown) lands outside it.
    fn leaves_only_at_its_back_edge(&self, (h, b): (usize, usize)) -> bool {
        let from = self.spans.partition_point(|&(k, _)| k < h);
        self.spans[from..]
            .iter()
            .take_while(|&&(k, _)| k < b)
            .all(|&(_, span)| span.is_some_and(|(lo, hi)| lo >= h && hi <= b))
    }
}

/// By statement position, whether it lies in some `(back-edge, header)` span of `loops`.
pub(crate) fn looped(loops: &[(usize, usize)]) -> Vec<bool> {
    let end = loops.iter().map(|&(b, _)| b + 1).max().unwrap_or(0);
    // Spans opened and closed at each position, summed as the positions go by.
    let mut opened = vec![0i64; end + 1];
    for &(b, h) in loops.iter().filter(|&&(b, h)| h <= b) {
        opened[h] += 1;
        opened[b + 1] -= 1;
    }
    let mut depth = 0;
    opened[..end]
        .iter()
        .map(|&d| {
            depth += d;
            depth > 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::looped;

    #[test]
    fn looped_positions_are_those_inside_some_span_as_a_search_would_say() {
        let loops = [(9, 4), (6, 5), (20, 20), (3, 7), (14, 0)];
        let laid = looped(&loops);
        for pos in 0..25 {
            let search = loops.iter().any(|&(b, h)| h <= pos && pos <= b);
            assert_eq!(laid.get(pos).copied().unwrap_or(false), search, "{pos}");
        }
        assert!(looped(&[]).is_empty());
    }
}
