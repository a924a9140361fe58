//! Loop versioning. A loop whose bound or step is known only at run time (`for (c = tid; c < n;
//! c += blockDim.x)`, `k < (x & 15)`) gets a second copy without abort polls, entered only when a
//! check at the loop's entry proves that it takes fewer than `poll_interval` back-edges; otherwise
//! the original loop runs and polls as before. On the H200 a poll costs its countdown, branch and
//! convergence barrier on every iteration, and ptxas no longer unrolls the loop
//! (docs/ISOLATION.md, "Cost"); the check costs about a dozen instructions per entry.
//!
//! The loops are bounded.rs's counted shape with a register in place of an immediate (or a
//! signed compare): innermost, entered only at the header, no call, `iv`'s one write
//! `add iv, iv, k` in the back-edge's block, the back-edge taken only while `iv < C` (or `<=`)
//! with `C` and `k` unchanged in the loop. The checked values are then `v0 + j*k` for
//! consecutive j, and the check proves, in 64-bit arithmetic where nothing wraps, that
//! `1 <= k`, `v0 <= C'` (`C' = C + 1` for `<=`), that `C' + k` does not pass the compare's
//! range (so no value wraps before one fails the compare), and `C' - v0 <= (N - 1) * k`: at most
//! N - 1 values pass.
//!
//! **Count-down loops** (version/until.rs, which holds their proof): the same shape with the
//! back-edge taken while `iv != C` (`setp.ne` and `@p`, or `setp.eq` and `@!p`), `k` of either
//! sign and an immediate too, as nvcc rotates counted loops (`add r, r, -2; setp.ne r, 0`).
//! Nothing in their text bounds them (`v0 == C` runs 2^bits / |k| iterations, an odd start for
//! k = -2 never meets 0), so every one is versioned; the check passes only when |k| divides
//! D = ±(C - v0) mod 2^bits, 1 <= D and D <= (N - 1) * |k|: the loop then leaves after at most
//! D / |k| <= N - 1 back-edges.
//!
//! The layout keeps every branch forward except the two back-edges, so both drivers reconverge
//! as before:
//!
//! ```text
//! H:      check → %gpuhost_vp;  @!%gpuhost_vp bra S
//! F:      fast copy (its labels renamed), back-edge to F;  bra X
//! S:      the original loop, back-edge to S (polled)
//! X:
//! ```
//!
//! Runs on the parsed module before the allow-list, so on hostile text: it changes nothing in a
//! module whose text mentions any name it would add (a branch to a label it adds would
//! otherwise enter the fast copy unchecked, and a loop under a fast copy's label would go
//! unpolled), and what it adds is ordinary PTX that the allow-list and the rewrite then treat as
//! the user's own. It returns the fast copies' header labels: their
//! back-edges are the ones bounded.rs exempts from polling.

mod until;

use super::hash::{HashMap, HashSet, HashSetExt};

use super::bounded::{Cfg, Counter, Item, Test, Val};
use crate::ast::{Inst, Module, Operand, Stmt, Str};
use crate::isa::Opcode;

/// Part of every name the pass adds.
const MARK: &str = "gpuhost_v";
/// The check's 64-bit scratch registers (`%gpuhost_vd0..3`) and its predicate.
const VD: &str = "%gpuhost_vd";
const VP: &str = "%gpuhost_vp";
/// A nested loop's check leaves here how many back-edges its fast copy may take, at most
/// (see [`Copies::charged`]).
pub(crate) const VT: &str = "%gpuhost_vt";

/// One loop to version: statement indices of its header label and back-edge in the body, and
/// what the check reads.
struct Plan {
    head: usize,
    back: usize,
    iv: String,
    /// `C` and `k`: a register or an immediate.
    limit: Operand<'static>,
    step: Operand<'static>,
    test: Test,
    bits: u32,
    /// Whether another loop encloses it: its fast copy's back-edges are then charged to that
    /// loop's poll count at entry, by the check's estimate, rather than as `poll_interval`.
    nested: bool,
}

/// The header labels of the copies [`apply`] made of each versioned loop.
#[derive(Default)]
pub(crate) struct Copies {
    /// The fast copies': their back-edges need no poll (bounded.rs).
    pub fast: HashSet<String>,
    /// The original loops', polled as before: a loop is versioned only when its text does not
    /// bound it, so bounded.rs need not try to prove it bounded again.
    pub slow: HashSet<String>,
    /// The fast copies of nested loops, whose check left in [`VT`] a bound on the back-edges
    /// the copy takes from that entry (at most `poll_interval`). The rewrite takes it off the
    /// thread's poll count where the copy is entered, so the enclosing loop's back-edge counts
    /// only itself. Charged as `poll_interval` instead, as other bounded loops are charged by
    /// their static bound, an outer loop around a loop of a few iterations polled (a global
    /// load waited for) on every one of its own: mbarrier_pipeline's producer, once per tile.
    pub charged: HashSet<String>,
}

/// Versions every eligible loop of `m`, parsed from `text`; gives the copies' header labels.
pub(crate) fn apply(m: &mut Module<'_>, text: &str, poll_interval: u32) -> Copies {
    let mut copies = Copies::default();
    // Every name of the tree is a piece of the text, or two joined by a dot (`%tid .x`), which
    // no mark contains: a text without the mark names nothing that has it. A text with it is
    // left unversioned as a whole, not just in the functions that name it: the fast copies'
    // labels are trusted across the module (bounded.rs exempts a back-edge to one from
    // polling), so one function's own loop under another's fast label went unpolled.
    // Searched for once a function has a loop to version: most modules have none.
    let mut searched = false;
    let mut n = 0u32;
    for f in &mut m.funcs {
        let Some(body) = f.body.as_mut() else {
            continue;
        };
        // Most functions have no loop to version, and then need no look through every name.
        let plans = plan(body);
        if plans.is_empty() {
            continue;
        }
        // Nothing is versioned yet: the module stays as it is.
        if !searched {
            if text.contains(MARK) {
                return copies;
            }
            searched = true;
        }
        // Plans are disjoint by construction (`counter` refuses a loop with a back-edge
        // inside it); should that ever not hold, the function stays unversioned, which is
        // always safe (its loops keep their polls).
        if plans.windows(2).any(|w| w[0].back >= w[1].head) {
            continue;
        }
        // The body rebuilt in one pass: the two registers, then each stretch up to a loop
        // header, then the loop versioned. Numbered from the last loop up, as they were when
        // each was spliced into place.
        let line = f.line;
        let old = std::mem::take(body);
        let (old_len, old_note) = (old.len(), f.heap_stmts.take());
        // The note of the statements that own memory (drop.rs), kept as the body is rebuilt.
        let mut note = old_note.as_deref().map(crate::drop::Renote::new);
        let extra: usize = plans.iter().map(|p| p.back - p.head + 24).sum();
        let mut out = Vec::with_capacity(old.len() + extra + 2);
        out.push(Stmt::Reg {
            ty: "pred".into(),
            names: vec![(VP.into(), None)],
            line,
        });
        out.push(Stmt::Reg {
            ty: "b64".into(),
            names: vec![(VD.into(), Some(4))],
            line,
        });
        if plans.iter().any(|p| p.nested) {
            out.push(Stmt::Reg {
                ty: "u32".into(),
                names: vec![(VT.into(), None)],
                line,
            });
        }
        if let Some(r) = note.as_mut() {
            r.made(&out, 0..out.len());
        }
        let (mut rest, mut at) = (old.into_iter(), 0);
        for (i, p) in plans.iter().enumerate() {
            let to = out.len();
            out.extend(rest.by_ref().take(p.head + 1 - at));
            let base = out.len();
            let k = n + (plans.len() - i) as u32;
            let orig = version(&mut out, &mut rest, p, k, poll_interval, &mut copies);
            if let Some(r) = note.as_mut() {
                // The check and the fast copy are new; the original loop moved, but for its
                // back-edge (retargeted) and the label after it.
                let len = p.back - p.head;
                r.moved(at, to, p.head + 1 - at);
                r.made(&out, base..orig);
                r.moved(p.head + 1, orig, len.saturating_sub(1));
                r.made(&out, (orig + len).saturating_sub(1)..out.len());
            }
            at = p.back + 1;
        }
        n += plans.len() as u32;
        let to = out.len();
        out.extend(rest);
        if let Some(r) = note.as_mut() {
            r.moved(at, to, old_len.saturating_sub(at));
        }
        f.heap_stmts = note.map(|r| r.note);
        *body = out;
    }
    copies
}

/// The loops of `body` worth versioning, in body order.
fn plan(body: &[Stmt]) -> Vec<Plan> {
    let tables: HashMap<&str, &[Str<'_>]> = body
        .iter()
        .filter_map(|s| match s {
            Stmt::Targets(n, ls, _) => Some((n.as_ref(), ls.as_slice())),
            _ => None,
        })
        .collect();
    let cfg = Cfg::new(body, &tables);
    let owned = |v: &Val<'_>| match v {
        Val::Imm(k) => Operand::Int(*k),
        Val::Reg(r) => name(r),
    };
    let mut plans: Vec<Plan> = Vec::new();
    // Headers already planned: looked up per back-edge, so not a walk over the plans.
    let mut planned = HashSet::new();
    for &(b, h) in &cfg.back {
        let Item::Inst(i) = cfg.items[b] else {
            continue;
        };
        // Statements only of the body's own list, with nothing but labels and instructions
        // between header and back-edge (those are what the fast copy repeats).
        let (Some(th), Some(tb)) = (cfg.top[h], cfg.top[b]) else {
            continue;
        };
        // (Too long a loop is never counted: skipped before its body is walked.)
        if tb - th != b - h
            || tb + 1 >= body.len()
            || !Cfg::provable((h, b))
            || cfg.body((h, b)).any(|j| j.op == Some(Opcode::Brx))
            || planned.contains(&th)
        {
            continue;
        }
        let Some(Counter::Counted {
            iv,
            limit,
            step,
            test,
            bits,
        }) = cfg.counter((h, b), i, &|_| false)
        else {
            continue;
        };
        match (test, &limit, &step) {
            // Loops whose bound follows from their text alone are bounded.rs's already.
            (Test::Below { signed: false, .. }, Val::Imm(_), Val::Imm(_)) => continue,
            // A count-down loop whose step can never pass the check needs no copy.
            (Test::Ne, _, Val::Imm(k)) if !until::step_may_pass(*k, bits) => continue,
            _ => {}
        }
        planned.insert(th);
        // Loops are innermost here, so an enclosing one is any other loop spanning it.
        let nested = cfg.enclosed((b, h));
        plans.push(Plan {
            head: th,
            back: tb,
            iv: iv.to_string(),
            limit: owned(&limit),
            step: owned(&step),
            test,
            bits,
            nested,
        });
    }
    plans.sort_by_key(|p| p.head);
    plans
}

/// A new instruction, attributed to source line `line` (the loop's back-edge). Its operands
/// come as an array: they go straight into the instruction's inline slots, where a `Vec` was
/// allocated for each and freed again.
fn new<const M: usize>(
    line: u32,
    guard: Option<(&'static str, bool)>,
    op: &'static str,
    mods: &[&'static str],
    operands: [Operand<'static>; M],
) -> Stmt<'static> {
    Stmt::Inst(Inst {
        guard: guard.map(|(g, n)| (Str::borrowed(g), n)),
        opcode: op.into(),
        op: Opcode::parse(op),
        mods: mods.iter().map(|&m| Str::borrowed(m)).collect(),
        operands: operands.into(),
        line,
    })
}

/// An owned name: the versioned body is edited in place, so nothing new may borrow it.
fn name(s: &str) -> Operand<'static> {
    Operand::Name(s.to_string().into())
}

/// `%gpuhost_vd<k>`, spelled out: a check names them a dozen times, and formatting each name
/// cost more than the rest of the check.
fn vd(k: u32) -> Operand<'static> {
    const NAMES: [&str; 4] = [
        "%gpuhost_vd0",
        "%gpuhost_vd1",
        "%gpuhost_vd2",
        "%gpuhost_vd3",
    ];
    match NAMES.get(k as usize) {
        Some(n) => Operand::Name(Str::borrowed(n)),
        None => Operand::Name(format!("{VD}{k}").into()),
    }
}

/// The check, onto `out`: `%gpuhost_vp` := the loop entered here takes fewer than `n`
/// back-edges.
fn check(p: &Plan, n: u32, line: u32, out: &mut Vec<Stmt<'_>>) {
    let (le, signed) = match p.test {
        Test::Below { le, signed } => (le, signed),
        Test::Ne => return until::check(p, n, line, out),
    };
    let (limit, step) = (p.limit.clone(), p.step.clone());
    let vp = || Operand::Name(Str::borrowed(VP));
    if p.bits == 32 {
        // Widened exactly (sign- or zero-extended): every sum below fits in 64 bits.
        let cvt: &[&str] = if signed {
            &["s64", "s32"]
        } else {
            &["u64", "u32"]
        };
        let max = if signed {
            i64::from(i32::MAX)
        } else {
            i64::from(u32::MAX)
        };
        let widen = |d: u32, o: Operand<'static>| match o {
            Operand::Int(k) => {
                let k = if signed {
                    k as i32 as i64
                } else {
                    k as u32 as i64
                };
                new(line, None, "mov", &["b64"], [vd(d), Operand::Int(k)])
            }
            o => new(line, None, "cvt", cvt, [vd(d), o]),
        };
        out.push(widen(0, name(&p.iv)));
        out.push(widen(1, limit));
        out.push(widen(2, step));
        if le {
            out.push(new(
                line,
                None,
                "add",
                &["s64"],
                [vd(1), vd(1), Operand::Int(1)],
            ));
        }
        out.push(new(
            line,
            None,
            "setp",
            &["ge", "s64"],
            [vp(), vd(2), Operand::Int(1)],
        ));
        out.push(new(
            line,
            None,
            "setp",
            &["le", "and", "s64"],
            [vp(), vd(0), vd(1), vp()],
        ));
        out.push(new(line, None, "add", &["s64"], [vd(3), vd(1), vd(2)]));
        out.push(new(
            line,
            None,
            "setp",
            &["le", "and", "s64"],
            [vp(), vd(3), Operand::Int(max), vp()],
        ));
    } else {
        // 64 bits: compared unsigned, so a negative start, bound or step fails the check; with
        // C <= 2^62 and k <= 2^32 no sum below wraps, and signed compares agree with unsigned.
        out.push(new(line, None, "mov", &["b64"], [vd(0), name(&p.iv)]));
        out.push(new(line, None, "mov", &["b64"], [vd(1), limit]));
        out.push(new(line, None, "mov", &["b64"], [vd(2), step]));
        out.push(new(
            line,
            None,
            "setp",
            &["le", "u64"],
            [vp(), vd(1), Operand::Int(1 << 62)],
        ));
        out.push(new(
            line,
            None,
            "setp",
            &["le", "and", "u64"],
            [vp(), vd(0), vd(1), vp()],
        ));
        out.push(new(
            line,
            None,
            "setp",
            &["ge", "and", "u64"],
            [vp(), vd(2), Operand::Int(1), vp()],
        ));
        out.push(new(
            line,
            None,
            "setp",
            &["le", "and", "u64"],
            [vp(), vd(2), Operand::Int(1 << 32), vp()],
        ));
        if le {
            out.push(new(
                line,
                None,
                "add",
                &["u64"],
                [vd(1), vd(1), Operand::Int(1)],
            ));
        }
    }
    // C' - v0 <= (n - 1) * k.
    out.push(new(line, None, "sub", &["s64"], [vd(3), vd(1), vd(0)]));
    if p.nested {
        out.push(log2_step(line, vd(2)));
    }
    out.push(new(
        line,
        None,
        "mul",
        &["lo", "s64"],
        [vd(2), vd(2), Operand::Int(i64::from(n) - 1)],
    ));
    out.push(new(
        line,
        None,
        "setp",
        &["le", "and", "u64"],
        [vp(), vd(3), vd(2), vp()],
    ));
    if p.nested {
        estimate(line, vd(3), vt(), n, vd(1), out);
    }
}

/// `%gpuhost_vt`.
fn vt() -> Operand<'static> {
    Operand::Name(Str::borrowed(VT))
}

/// `%gpuhost_vt` := floor(log2 `step`), for [`estimate`]; `step` >= 1 wherever the check
/// passes (elsewhere the estimate goes unused).
fn log2_step(line: u32, step: Operand<'static>) -> Stmt<'static> {
    new(line, None, "bfind", &["u64"], [vt(), step])
}

/// `%gpuhost_vt` := min((`d` >> `shift`) + 1, `n`), through the free scratch register
/// `scratch`: where the check passed, the loop's values pass its test `d` / k times or one more
/// (`d` the distance to its bound, k its step), and `2^shift` <= k, so this is at least the
/// back-edges the fast copy takes; the check proved those fewer than `n`, hence the min, which
/// keeps the charge within one poll interval.
fn estimate(
    line: u32,
    d: Operand<'static>,
    shift: Operand<'static>,
    n: u32,
    scratch: Operand<'static>,
    out: &mut Vec<Stmt<'_>>,
) {
    out.push(new(
        line,
        None,
        "shr",
        &["u64"],
        [scratch.clone(), d, shift],
    ));
    out.push(new(
        line,
        None,
        "add",
        &["u64"],
        [scratch.clone(), scratch.clone(), Operand::Int(1)],
    ));
    out.push(new(
        line,
        None,
        "min",
        &["u64"],
        [scratch.clone(), scratch.clone(), Operand::Int(i64::from(n))],
    ));
    out.push(new(line, None, "cvt", &["u32", "u64"], [vt(), scratch]));
}

/// `lead`, the mark, `k` and `tail`, as `format!` spells them: pushed, for `format!` cost a
/// loop's four names more than the rest of its labels.
fn marked(lead: &str, k: u32, tail: &str) -> String {
    let mut s = String::with_capacity(lead.len() + MARK.len() + 10 + tail.len());
    s.push_str(lead);
    s.push_str(MARK);
    super::print::unsigned(&mut s, k.into());
    s.push_str(tail);
    s
}

/// Appends to `out` the loop `p` (the next `p.back - p.head` statements of `rest`: its
/// statements after the header, through the back-edge) as check, fast copy and original
/// (module header). The fast copy is cloned from `rest` in place; the original statements are
/// then moved once, straight from `rest` (collected aside first, each was moved twice). Gives
/// where in `out` the original statements begin.
fn version<'s>(
    out: &mut Vec<Stmt<'s>>,
    rest: &mut std::vec::IntoIter<Stmt<'s>>,
    p: &Plan,
    k: u32,
    n: u32,
    copies: &mut Copies,
) -> usize {
    let len = p.back - p.head;
    let looped = &rest.as_slice()[..len.min(rest.len())];
    // plan() admits only a back-edge instruction last; anything else stays as it was.
    let Some((Stmt::Inst(back), looped)) = looped.split_last() else {
        let orig = out.len();
        out.extend(rest.by_ref().take(len));
        return orig;
    };
    let (f, s, x) = (
        marked("$", k, "_f"),
        marked("$", k, "_s"),
        marked("$", k, "_x"),
    );
    let line = back.line;
    // The loop's own labels, renamed in the fast copy.
    // Keyed by the names as they are (borrowed) and built by pushing: format! and an owned
    // key cost more than the rest of a label's copy.
    let suffix = marked("_", k, "");
    let renamed: HashMap<&str, String> = looped
        .iter()
        .filter_map(|st| match st {
            Stmt::Label(l, _) => {
                let mut r = String::with_capacity(l.len() + suffix.len());
                r.push_str(l);
                r.push_str(&suffix);
                Some((l.as_ref(), r))
            }
            _ => None,
        })
        .collect();
    out.reserve(2 * looped.len() + 24);
    check(p, n, line, out);
    out.push(new(line, Some((VP, true)), "bra", &[], [name(&s)]));
    out.push(Stmt::Label(f.clone().into(), line));
    for st in looped {
        out.push(match st {
            Stmt::Label(l, ln) => Stmt::Label(
                renamed
                    .get(&**l)
                    .map_or_else(|| l.clone(), |r| r.clone().into()),
                *ln,
            ),
            Stmt::Inst(i) => {
                let mut j = i.clone();
                if let Some(Operand::Name(t)) = j.operands.first_mut()
                    && j.opcode == "bra"
                    && let Some(r) = renamed.get(t.as_ref())
                {
                    *t = r.clone().into();
                }
                Stmt::Inst(j)
            }
            // plan() admits only labels and instructions here.
            _ => continue,
        });
    }
    let mut fast_back = back.clone();
    if let Some(o) = fast_back.operands.first_mut() {
        *o = name(&f);
    }
    out.push(Stmt::Inst(fast_back));
    out.push(new(line, None, "bra", &["uni"], [name(&x)]));
    out.push(Stmt::Label(s.clone().into(), line));
    // The original loop, moved (not copied) behind S, its back-edge retargeted there.
    let orig = out.len();
    out.extend(rest.by_ref().take(len));
    if let Some(Stmt::Inst(slow_back)) = out.last_mut()
        && let Some(o) = slow_back.operands.first_mut()
    {
        *o = name(&s);
    }
    out.push(Stmt::Label(x.into(), line));
    if p.nested {
        copies.charged.insert(f.clone());
    }
    copies.fast.insert(f);
    copies.slow.insert(s);
    orig
}

#[cfg(test)]
mod tests {
    use super::{Module, Operand, Test, VD, plan, vd};

    /// A kernel of one loop, `L: add.u32 %r3, %r3, 1; <tail>` with `@...bra L` in `tail`.
    fn module(tail: &str) -> Module<'static> {
        module_around("", tail, "")
    }

    /// [`module`] with `before` ahead of `L:` and `after` behind `tail`.
    fn module_around(before: &str, tail: &str, after: &str) -> Module<'static> {
        let text = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a)\n{{\n\
             .reg .b64 %rd<4>;\n.reg .b32 %r<6>;\n.reg .pred %p<3>;\n\
             ld.param.u32 %r1, [a];\n{before}L:\nadd.u32 %r3, %r3, 1;\n{tail}\n{after}ret;\n}}\n"
        );
        let m = crate::parse::parse(&crate::lex::lex(&text).unwrap()).unwrap();
        m.into_owned()
    }

    /// The loop's plan, as `iv limit step bits` for a count-down loop (`below` for the other
    /// shape); `None` when it is not versioned.
    fn planned(tail: &str) -> Option<String> {
        let m = module(tail);
        let plans = plan(m.funcs[0].body.as_ref().unwrap());
        assert!(plans.len() <= 1, "{tail}");
        plans.first().map(|p| match p.test {
            Test::Ne => format!("{} {:?} {:?} {}", p.iv, p.limit, p.step, p.bits),
            Test::Below { .. } => "below".to_string(),
        })
    }

    #[test]
    fn a_nested_counted_loops_check_bounds_the_back_edges_its_fast_copy_takes() {
        use super::{Plan, Str, check};
        use std::collections::HashMap;
        const N: u32 = 16;
        let mut next = super::until::tests::xorshift(0x9e37_79b9_7f4a_7c15);
        let name = |n: &str| Operand::Name(Str::owned(n.to_string()));
        let mut passed = 0;
        for round in 0..40_000u64 {
            let bits = if round % 2 == 0 { 32 } else { 64 };
            let (signed, le) = (next().is_multiple_of(2), next().is_multiple_of(2));
            let mask = if bits == 32 { 0xffff_ffff } else { u64::MAX };
            // Small steps mostly (those pass), and any; C a few steps from v0, or anywhere.
            let k = match next() % 3 {
                0 => next() % 5,
                1 => next() % 300,
                _ => next(),
            } & mask;
            let v0 = next() & mask;
            let c = match next() % 2 {
                0 => v0
                    .wrapping_add((next() % 24).wrapping_mul(k))
                    .wrapping_add(next() % 3),
                _ => next(),
            } & mask;
            let p = Plan {
                head: 0,
                back: 0,
                iv: "%iv".into(),
                limit: name("%c"),
                step: name("%k"),
                test: Test::Below { le, signed },
                bits,
                nested: true,
            };
            let mut code = Vec::new();
            check(&p, N, 1, &mut code);
            let mut regs = HashMap::from([
                ("%iv".to_string(), v0),
                ("%c".to_string(), c),
                ("%k".to_string(), k),
            ]);
            if !super::until::tests::passes(&code, &mut regs) {
                continue;
            }
            passed += 1;
            let vt = regs["%gpuhost_vt"];
            let case = format!("bits {bits} signed {signed} le {le} v0 {v0:#x} c {c:#x} k {k:#x}");
            assert!(vt <= u64::from(N), "{case}: estimate {vt}");
            // The values the back-edge compares, from v0 (compare before the add) or v0 + k.
            let key = |v: u64| match (signed, bits) {
                (true, 32) => i128::from(v as u32 as i32),
                (true, _) => i128::from(v as i64),
                _ => i128::from(v),
            };
            for first in [0, 1] {
                let taken = (first..)
                    .take(4 * N as usize)
                    .map(|j: u64| v0.wrapping_add(j.wrapping_mul(k)) & mask)
                    .take_while(|&v| {
                        if le {
                            key(v) <= key(c)
                        } else {
                            key(v) < key(c)
                        }
                    })
                    .count() as u64;
                assert!(taken <= vt, "{case}: {taken} back-edges > {vt}");
            }
        }
        assert!(passed > 5_000, "{passed} passed");
    }

    #[test]
    fn only_a_loop_inside_another_is_planned_nested() {
        let inner = "setp.lt.u32 %p1, %r3, %r1;\n@%p1 bra L;";
        let alone = plan(module(inner).funcs[0].body.as_ref().unwrap());
        assert!(alone.len() == 1 && !alone[0].nested);
        let outer = "add.u32 %r4, %r4, 1;\nsetp.lt.u32 %p2, %r4, %r5;\n@%p2 bra O;\n";
        let m = module_around("O:\n", inner, outer);
        let within = plan(m.funcs[0].body.as_ref().unwrap());
        assert!(within.len() == 1 && within[0].nested);
    }

    #[test]
    fn count_down_loops_are_planned_in_each_spelling_nvcc_and_clang_use() {
        let until = |iv: &str, c: &str, k: &str, bits| {
            let op = |x: &str| match x.parse::<i64>() {
                Ok(v) => format!("{:?}", Operand::Int(v)),
                Err(_) => format!("{:?}", super::name(x)),
            };
            Some(format!("{iv} {} {} {bits}", op(c), op(k)))
        };
        // nvcc's rotated loop, unrolled by 2.
        let nvcc = "add.s32 %r1, %r1, -2;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra L;";
        assert_eq!(planned(nvcc), until("%r1", "0", "-2", 32));
        // `setp.eq` read through `@!p`; the compare before the add; register step and bound.
        let eq = "add.s32 %r1, %r1, %r2;\nsetp.eq.s32 %p1, %r1, %r4;\n@!%p1 bra L;";
        assert_eq!(planned(eq), until("%r1", "%r4", "%r2", 32));
        let before = "setp.ne.u32 %p1, %r1, %r4;\nadd.u32 %r1, %r1, 3;\n@%p1 bra L;";
        assert_eq!(planned(before), until("%r1", "%r4", "3", 32));
        let wide = "add.s64 %rd1, %rd1, %rd2;\nsetp.ne.s64 %p1, %rd1, %rd3;\n@%p1 bra L;";
        assert_eq!(planned(wide), until("%rd1", "%rd3", "%rd2", 64));
        // `.and q` makes p true only when iv != C as well.
        let anded = "add.s32 %r1, %r1, -1;\nsetp.ne.and.s32 %p1, %r1, 0, %p2;\n@%p1 bra L;";
        assert_eq!(planned(anded), until("%r1", "0", "-1", 32));
    }

    #[test]
    fn count_down_loops_that_no_entry_check_can_bound_are_not_planned() {
        for tail in [
            // Taken while iv == C, or while iv != C || q: no bound from the compare.
            "add.s32 %r1, %r1, -1;\nsetp.eq.s32 %p1, %r1, 0;\n@%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nsetp.ne.s32 %p1, %r1, 0;\n@!%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nsetp.eq.and.s32 %p1, %r1, 0, %p2;\n@!%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nsetp.ne.or.s32 %p1, %r1, 0, %p2;\n@%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nsetp.eq.s32 %p2, %r1, 0;\nand.pred %p1, %p2, %p2;\n@!%p1 bra L;",
            // The step or the bound written in the loop; iv written twice, or by a guarded add.
            "add.s32 %r1, %r1, %r2;\nneg.s32 %r2, %r2;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nadd.s32 %r4, %r4, 1;\nsetp.ne.s32 %p1, %r1, %r4;\n@%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nadd.s32 %r1, %r1, -1;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra L;",
            "@%p2 add.s32 %r1, %r1, -1;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra L;",
            // The compare against iv itself, or at another width than the add.
            "add.s32 %r1, %r1, -1;\nsetp.ne.s32 %p1, %r1, %r1;\n@%p1 bra L;",
            "add.s32 %r1, %r1, -1;\nsetp.ne.s64 %p1, %r1, 0;\n@%p1 bra L;",
            // Immediate steps that can never pass the check: 0, and past 2^32 at 64 bits.
            "add.s32 %r1, %r1, 0;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra L;",
            "add.s64 %rd1, %rd1, 8589934592;\nsetp.ne.s64 %p1, %rd1, 0;\n@%p1 bra L;",
            // A halving loop spelled with `setp.eq` and `@!p` is bounded by its text.
            "shr.u32 %r1, %r1, 1;\nsetp.eq.s32 %p1, %r1, 0;\n@!%p1 bra L;",
        ] {
            assert_eq!(planned(tail), None, "{tail}");
        }
    }

    #[test]
    fn immediate_steps_may_pass_only_between_one_and_two_to_the_32() {
        use super::until::step_may_pass;
        assert!(step_may_pass(-2, 32) && step_may_pass(0xffff_fffe, 32));
        assert!(step_may_pass(i64::from(i32::MIN), 32) && step_may_pass(-(1 << 32), 64));
        assert!(!step_may_pass(0, 32) && !step_may_pass(1 << 32, 32));
        assert!(!step_may_pass((1 << 32) + 1, 64) && !step_may_pass(i64::MIN, 64));
    }

    #[test]
    fn marked_names_are_spelled_as_format_spells_them() {
        for k in [0, 7, 10, 4_294_967_295] {
            assert_eq!(super::marked("$", k, "_f"), format!("$gpuhost_v{k}_f"));
            assert_eq!(super::marked("_", k, ""), format!("_gpuhost_v{k}"));
        }
    }

    #[test]
    fn vd_is_the_prefix_and_the_index() {
        for k in 0..6 {
            assert_eq!(vd(k), Operand::Name(format!("{VD}{k}").into()));
        }
    }
}
