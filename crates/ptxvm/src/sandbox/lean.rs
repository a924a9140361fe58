//! Lean device functions: those that need no hidden value, so they keep their own signature,
//! get no prologue, and their calls cost what they cost unsandboxed. A lean function never
//! polls; the bound on the instructions one call of it runs ([`LEAN_SPAN`]) is what keeps a
//! stopped thread from running on through a tree of them.

use super::hash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::allow::{Info, call_parts};
use super::print::O;
use super::rewrite::{R, rewrite_body};
use crate::ast::{Func, Module, Stmt};
use crate::isa::Opcode;

/// Whether device function `f`'s rewritten body reads a hidden value itself, other than to
/// pass it on at a call (its callees are `lean::functions`' to judge). User code cannot name
/// `%__sbx_` registers (the allow-list refuses the prefix), so any mention is the rewriter's:
/// a fence, a poll, a relocated global, a fault report.
fn reads_hidden<'m>(info: &Info<'m>, f: &'m Func<'m>) -> R<bool> {
    let Some(b) = &f.body else {
        return Ok(false);
    };
    // As a lean function: the count a non-lean one keeps for its lean calls is no reason to
    // stay non-lean, since a lean one keeps none (its span bounds it). Before session 18 that
    // count made every function with a counted loop of lean calls (`collatz_steps`) non-lean,
    // and each call in the loop a countdown and branch: device_call replayed 1.89x native.
    let (fx, body) = rewrite_body(info, f, b, true)?;
    if fx.ngroups > 0 {
        return Ok(true);
    }
    mentions_hidden(&body, &mut String::new())
}

/// Whether the kernel's printing of `body` (`Own::Print`, not the skip copy's) has a line that
/// names a `%__sbx_` register, other than a store passing a hidden value on. Only what the
/// rewrite made is looked at: the input's own statements cannot name one (the allow-list
/// refuses the prefix), and printing them was most of this look.
fn mentions_hidden(body: &[O<'_>], scratch: &mut String) -> R<bool> {
    let reads = |text: &str| {
        text.lines()
            .any(|l| l.contains("%__sbx_") && !l.trim_start().starts_with(HIDDEN_STORE))
    };
    for o in body {
        let hit = match o {
            O::Inst(_) | O::Stmt(_) | O::Copy(_) => false,
            O::Text(t) => reads(t),
            O::Block(b) | O::Kernel(b) => mentions_hidden(b, scratch)?,
            O::New(_) | O::Report(_) => {
                scratch.clear();
                let mut own = super::print::Own::Print { skip_copy: false };
                super::print::outs(scratch, std::slice::from_ref(o), 0, &mut own)?;
                reads(scratch)
            }
        };
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The device functions that need no hidden value: they read none themselves
/// (`reads_hidden`), call only such functions (the call graph is acyclic: `allow` refuses
/// recursion), and one call of them runs at most [`LEAN_SPAN`] instructions (`span`). Hot
/// helpers (`collatz_next`, math) are typically lean, and their calls then cost what they cost
/// unsandboxed. A lean function never polls, so the span bound is what keeps a stopped
/// kernel's thread from running on through a tree of them; the others poll at every call.
///
/// `known` keeps each function's `reads_hidden` from earlier rounds of the fixpoint in
/// `sandbox`, with the leanness of its callees then: its rewrite depends on the lean set only
/// through them, so a round rewrites again only the functions whose callees changed.
pub(crate) fn functions<'m>(
    info: &Info<'m>,
    m: &'m Module<'m>,
    known: &mut HashMap<&'m str, (Vec<bool>, bool)>,
) -> R<(HashSet<&'m str>, HashMap<&'m str, u64>)> {
    let mut lean = HashSet::new();
    for f in m.funcs.iter().filter(|f| !f.is_entry && f.body.is_some()) {
        let name = f.name.as_ref();
        let callees: Vec<bool> = info
            .callees(name)
            .iter()
            .map(|c| info.lean.contains(c))
            .collect();
        let reads = match known.get(name) {
            Some((then, reads)) if *then == callees => *reads,
            _ => {
                let reads = reads_hidden(info, f)?;
                known.insert(name, (callees, reads));
                reads
            }
        };
        if !reads {
            lean.insert(name);
        }
    }
    loop {
        let calls_heavy: Vec<&str> = lean
            .iter()
            .copied()
            .filter(|f| info.callees(f).iter().any(|c| !lean.contains(c)))
            .collect();
        if !calls_heavy.is_empty() {
            for f in calls_heavy {
                lean.remove(f);
            }
            continue;
        }
        let mut spans = HashMap::new();
        let long: Vec<&str> = lean
            .iter()
            .copied()
            .filter(|f| span(info, f, &mut spans) > LEAN_SPAN)
            .collect();
        if long.is_empty() {
            spans.retain(|f, _| lean.contains(f));
            return Ok((lean, spans));
        }
        for f in long {
            lean.remove(f);
        }
    }
}

/// What a lean call of `span` instructions counts toward the caller's next poll, in back-edges:
/// one per [`LEAN_CALL_UNIT`] instructions, at least one.
pub(crate) fn call_weight(span: u64) -> u32 {
    u32::try_from(span / LEAN_CALL_UNIT).map_or(u32::MAX, |w| w.max(1))
}

/// Instructions of a lean call counted as one back-edge: about a short loop body's worth, so
/// a thread between two polls runs about as long whether it loops or calls.
const LEAN_CALL_UNIT: u64 = 32;

/// What a `nanosleep` counts in a span: it may wait up to a millisecond, the time of far more
/// than [`LEAN_SPAN`] instructions, so no function that sleeps is lean and no kernel that
/// sleeps skips its entry read.
pub(crate) const NANOSLEEP_SPAN: u64 = 1 << 20;

/// The most instructions one call of a lean function may run, its callees' included.
/// 65,536: far above what a math helper runs (tens to hundreds), and low enough that a thread
/// stopped while in one finishes within a kernel's usual stop time.
pub const LEAN_SPAN: u64 = 1 << 16;

/// An upper bound on the instructions one call of `f` runs, when `f` and every function it
/// calls poll nowhere: each instruction once, a call as its callee's span besides, and all of
/// it `poll_interval + 1` times over when `f` has a backward branch (an unpolled loop in such a
/// function is a counted one of at most `poll_interval` iterations). Saturating; memoised in
/// `spans` (the call graph is acyclic).
fn span<'m>(info: &Info<'m>, f: &'m str, spans: &mut HashMap<&'m str, u64>) -> u64 {
    if let Some(&s) = spans.get(f) {
        return s;
    }
    let Some(g) = info.funcs.get(f).copied() else {
        return 0;
    };
    let Some(body) = g.body.as_deref() else {
        return 0;
    };
    let mut total = 0u64;
    let mut stack: Vec<&'m [Stmt<'m>]> = vec![body];
    while let Some(stmts) = stack.pop() {
        for st in stmts {
            match st {
                Stmt::Inst(i) => {
                    let op = i.op;
                    total = total.saturating_add(if op == Some(Opcode::Nanosleep) {
                        NANOSLEEP_SPAN
                    } else {
                        1
                    });
                    if op == Some(Opcode::Call)
                        && let Ok((callee, _)) = call_parts(i)
                        && let Some((&name, _)) = info.funcs.get_key_value(callee)
                    {
                        total = total.saturating_add(span(info, name, spans));
                    }
                }
                Stmt::Block(b) => stack.push(b),
                _ => {}
            }
        }
    }
    if !info.forward_only(g) {
        total = total.saturating_mul(u64::from(info.poll_interval) + 1);
    }
    spans.insert(f, total);
    total
}

/// How a call site stores a hidden value for its callee (`rewrite::Fx::call`).
const HIDDEN_STORE: &str = "st.param.b64 [__gpuhost_sbx_c";
