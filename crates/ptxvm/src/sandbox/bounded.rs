//! Counted loops that need no abort poll. A back-edge is taken at most B times per entry into
//! its loop when the loop is innermost (no other back-edge inside), entered only at its header,
//! calls nothing that can loop (lean device functions have no back-edge: a back-edge polls, and
//! a poll reads a hidden value), and its branch is taken only while `iv < C` (unsigned, `C` an
//! immediate) where `iv`'s one write in the loop is `add iv, iv, k` (k >= 1) in the branch's
//! basic block: the checked values then grow by k per iteration, so B <= C/k + 2 even across
//! wrap-around. Such a loop with B <= poll_interval (`collatz_steps`' `i < 1000`) runs as nvcc
//! wrote it; the instrumented back-edge of each loop around it counts its B back-edges as well
//! as its own, so a thread still polls after at most about `poll_interval` back-edges (plus a
//! constant: each bounded loop's last run before its enclosing back-edge is charged).

use std::collections::{HashMap, HashSet};

use super::allow::call_parts;
use super::group::writes;
use crate::ast::{Inst, Operand, Stmt};

/// What the rewrite does at a back-edge, by instruction.
#[derive(Default)]
pub(crate) struct BackEdges {
    /// Back-edges of bounded loops: no poll.
    pub bounded: HashSet<*const Inst>,
    /// Instrumented back-edges that stand for more than one back-edge: how many.
    pub weight: HashMap<*const Inst, u32>,
}

enum Item<'m> {
    Label(&'m str),
    Inst(&'m Inst),
}

fn flatten<'m>(body: &'m [Stmt], out: &mut Vec<Item<'m>>) {
    for s in body {
        match s {
            Stmt::Label(l, _) => out.push(Item::Label(l)),
            Stmt::Inst(i) => out.push(Item::Inst(i)),
            Stmt::Block(b) => flatten(b, out),
            _ => {}
        }
    }
}

/// Positions a branch may jump to; `None` when unknown (a `brx` whose table is not found).
fn targets(
    i: &Inst,
    labels: &HashMap<&str, usize>,
    tables: &HashMap<&str, &[String]>,
) -> Option<Vec<usize>> {
    let names: Vec<&str> = match i.opcode.as_str() {
        "bra" => match i.operands.first() {
            Some(Operand::Name(l)) => vec![l.as_str()],
            _ => return None,
        },
        "brx" => match i.operands.get(1) {
            Some(Operand::Name(t)) => tables.get(t.as_str())?.iter().map(String::as_str).collect(),
            _ => return None,
        },
        _ => return Some(Vec::new()),
    };
    names.iter().map(|n| labels.get(n).copied()).collect()
}

/// The register `i` compares against an immediate bound, and that bound plus one for `le`:
/// `setp.lt.u32 P, iv, C` (or `.le`, `.u64`, combined with `.and`), read with `P` true.
fn bound_of<'m>(i: &'m Inst, p: &str) -> Option<(&'m str, u64, u32)> {
    if i.opcode != "setp" || i.guard.is_some() {
        return None;
    }
    let has = |m: &str| i.mods.iter().any(|x| x == m);
    let extra = if has("lt") {
        0
    } else if has("le") {
        1
    } else {
        return None;
    };
    let bits = if has("u32") {
        32
    } else if has("u64") {
        64
    } else {
        return None;
    };
    if has("or") || has("xor") {
        return None;
    }
    let first = match i.operands.first()? {
        Operand::Name(n) => n,
        Operand::Pair(n, _) => n,
        _ => return None,
    };
    match (i.operands.get(1)?, i.operands.get(2)?) {
        (Operand::Name(iv), Operand::Int(c)) if first == p && *c >= 0 => {
            Some((iv.as_str(), (*c as u64).checked_add(extra)?, bits))
        }
        _ => None,
    }
}

/// Analyses one function body. `lean` names the device functions without back-edges.
pub(crate) fn analyse(
    body: &[Stmt],
    lean: &HashSet<&str>,
    tables: &HashMap<&str, &[String]>,
    poll_interval: u32,
) -> BackEdges {
    let mut items = Vec::new();
    flatten(body, &mut items);
    let labels: HashMap<&str, usize> = items
        .iter()
        .enumerate()
        .filter_map(|(k, it)| match it {
            Item::Label(l) => Some((*l, k)),
            Item::Inst(_) => None,
        })
        .collect();
    // Every branch: position, targets (None: anywhere).
    let branches: Vec<(usize, Option<Vec<usize>>)> = items
        .iter()
        .enumerate()
        .filter_map(|(k, it)| match it {
            Item::Inst(i) if matches!(i.opcode.as_str(), "bra" | "brx") => {
                Some((k, targets(i, &labels, tables)))
            }
            _ => None,
        })
        .collect();
    let back: Vec<(usize, usize)> = branches
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
    let mut out = BackEdges::default();
    let mut loops: Vec<(usize, usize, u64)> = Vec::new();
    for &(b, h) in &back {
        let Item::Inst(i) = items[b] else { continue };
        if let Some(n) = bounded(&items, &branches, &back, (h, b), i, lean)
            && n <= u64::from(poll_interval)
        {
            out.bounded.insert(i as *const Inst);
            loops.push((h, b, n));
        }
    }
    for &(b, h) in &back {
        let Item::Inst(i) = items[b] else { continue };
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

/// B for the loop `[h, b]` closed by `i`, if it is a bounded loop (see the module's header).
fn bounded(
    items: &[Item<'_>],
    branches: &[(usize, Option<Vec<usize>>)],
    back: &[(usize, usize)],
    (h, b): (usize, usize),
    i: &Inst,
    lean: &HashSet<&str>,
) -> Option<u64> {
    if i.opcode != "bra" {
        return None;
    }
    let (p, neg) = i.guard.as_ref()?;
    if *neg || back.iter().any(|&(k, _)| k > h && k < b) {
        return None;
    }
    // Entered only at its header: no branch from outside lands inside.
    let outside = |k: usize| k < h || k > b;
    if branches.iter().any(|(k, t)| {
        outside(*k)
            && t.as_ref()
                .is_none_or(|t| t.iter().any(|&x| x > h && x <= b))
    }) {
        return None;
    }
    let body = || {
        items[h + 1..b].iter().filter_map(|it| match it {
            Item::Inst(j) => Some(*j),
            Item::Label(_) => None,
        })
    };
    if body().any(|j| j.opcode == "call" && call_parts(j).map_or(true, |(c, _)| !lean.contains(c)))
    {
        return None;
    }
    // The branch's basic block: from the last label before it.
    let start = (h..b)
        .rev()
        .find(|&k| matches!(items[k], Item::Label(_)))
        .unwrap_or(h);
    let block: Vec<&Inst> = items[start + 1..b]
        .iter()
        .filter_map(|it| match it {
            Item::Inst(j) => Some(*j),
            Item::Label(_) => None,
        })
        .collect();
    let last_def = |before: usize, reg: &str| {
        block[..before]
            .iter()
            .rposition(|j| writes(j, reg))
            .map(|k| (k, block[k]))
    };
    let (kp, def) = last_def(block.len(), p)?;
    let (iv, c, bits) = match bound_of(def, p) {
        Some(x) => x,
        None if def.opcode == "and" && def.guard.is_none() => {
            let ops = [def.operands.get(1)?, def.operands.get(2)?];
            ops.iter().find_map(|o| match o {
                Operand::Name(a) => last_def(kp, a).and_then(|(_, d)| bound_of(d, a)),
                _ => None,
            })?
        }
        None => return None,
    };
    // iv's one write in the loop: `add iv, iv, k` in the branch's block.
    let mut writers = body().filter(|j| writes(j, iv));
    let add = writers.next()?;
    if writers.next().is_some() || !block.iter().any(|j| std::ptr::eq(*j, add)) {
        return None;
    }
    let width_ok = add.mods.iter().any(|m| match bits {
        32 => matches!(m.as_str(), "u32" | "s32"),
        _ => matches!(m.as_str(), "u64" | "s64"),
    });
    match (add.opcode.as_str(), &add.guard, add.operands.as_slice()) {
        ("add", None, [Operand::Name(d), Operand::Name(s), Operand::Int(k)])
            if d == iv && s == iv && *k >= 1 && width_ok && add.mods.len() == 1 =>
        {
            Some(c.div_ceil(*k as u64) + 2)
        }
        _ => None,
    }
}
