//! If-conversion of short guarded blocks. nvcc writes `if (c) { a = in[i]; tile[j] = a; }` as a
//! forward branch over a few instructions, and ptxas turns such a block back into predicated
//! instructions, so the loads of several blocks issue back to back. Once the sandbox has added its
//! fences the blocks are too long for that: on the H200 transpose kept four branchy blocks, each
//! load waiting out its latency before the next block began (2.11 µs against 1.25 native,
//! bench/h200-runs/2026-12-02-s10/sass). This pass predicates such blocks itself, before the
//! rewrite, so the fences are emitted for predicated accesses (they take the guard into their
//! checks) and ptxas sees straight-line code.
//!
//! A block qualifies when `@p bra L` (or `@!p bra L`) is followed, in the same statement list, by
//! at most [`MAX_BLOCK`] unguarded instructions of the kinds below and then by the label `L`
//! itself: no label inside (nothing else enters it), no branch, call, barrier, collective or
//! carry-chain instruction (predicating those changes what they do or whom they wait for), none
//! that writes the branch's predicate (the guard every instruction gets), and no
//! `.local` access: converting local_sort's compare-and-store blocks cost its insertion sort
//! 1.00 → 1.19× on the H200 (bench/h200-runs/2026-12-02-s10/ifconvert; why was not examined).
//! There transpose (1.69 → 1.25×), reduce_shared and scan_block gained most. oob_write_in_range
//! seemed to lose (1.05 → 1.13 µs graph-replayed), but two byte-identical rewrites of it time that
//! far apart too (session 11's A/A run, bench/h200-runs/2026-12-02-s11/4e9e1ae-bench), so no rule
//! keeps its block a branch. Each instruction gets the branch's negated guard and the branch goes;
//! `L` stays for other branches.
//! Predicated-off instructions do nothing, so the block's effect is the same on every path.

use crate::ast::{Inst, Module, Stmt, Str};
use crate::isa::{Family, Opcode};
use crate::small::Item;

/// Longest block converted (a reasoned bound, not tuned): a long block's predicated-off
/// instructions cost more issue slots than the branch over them.
const MAX_BLOCK: usize = 16;

/// Predicates every qualifying block of `m`; gives how many.
pub(crate) fn apply(m: &mut Module) -> usize {
    let mut n = 0;
    for f in &mut m.funcs {
        if let Some(body) = f.body.as_mut() {
            n += convert(body, &mut f.heap_stmts);
        }
    }
    n
}

/// Whether `i` may run under a guard instead of behind a branch.
fn predicable(i: &Inst) -> bool {
    if i.guard.is_some() || i.mods.iter().any(|m| m == "cc") {
        return false;
    }
    match i.op {
        Some(Opcode::Addc | Opcode::Madc | Opcode::Subc) => false,
        Some(Opcode::Ld | Opcode::Ldu | Opcode::St | Opcode::Atom | Opcode::Red) => true,
        Some(op) => op.family() == Family::Arith,
        None => false,
    }
}

/// Whether `i` reads or writes the thread's `.local` memory.
fn local_access(i: &Inst) -> bool {
    matches!(
        i.op,
        Some(Opcode::Ld | Opcode::Ldu | Opcode::St | Opcode::Atom | Opcode::Red)
    ) && i.mods.iter().any(|m| m == "local")
}

/// Converts `body`'s qualifying blocks; keeps `heap` (its note of the statements that own
/// memory, drop.rs) true of it.
fn convert(body: &mut Vec<Stmt>, heap: &mut Option<Vec<u32>>) -> usize {
    // The converted blocks' branches, dropped in one pass at the end: removing each one at
    // once moved the rest of the body every time.
    let mut gone = Vec::new();
    let mut k = 0;
    while k < body.len() {
        let Some((end, guard)) = block_at(body, k) else {
            k += 1;
            continue;
        };
        // A guard the text spelled is borrowed from it; one a pass made owns its name, and
        // the instructions that get it would own it too: the note is then made again.
        if !guard.0.owns_nothing() {
            *heap = None;
        }
        for s in &mut body[k + 1..end] {
            if let Stmt::Inst(i) = s {
                i.guard = Some(guard.clone());
            }
        }
        gone.push(k);
        // Nothing up to the label opens another block: the block's instructions are guarded
        // now (a branch over them, before `k`, no longer qualifies) and none is a branch.
        k = end;
    }
    if !gone.is_empty() {
        let (mut at, mut next) = (0, gone.iter().copied().peekable());
        body.retain(|_| {
            let drop = next.next_if_eq(&at).is_some();
            at += 1;
            !drop
        });
        match heap {
            Some(h) => crate::drop::removed(h, &gone),
            None => *heap = Some(crate::drop::heap_stmts(body)),
        }
    }
    gone.len()
}

/// A convertible block opened by the branch at `k`: the index of its closing label and the guard
/// its instructions get.
fn block_at<'a>(body: &[Stmt<'a>], k: usize) -> Option<(usize, (Str<'a>, bool))> {
    let Stmt::Inst(b) = &body[k] else {
        return None;
    };
    let (p, neg) = b.guard.as_ref()?;
    let target = match (b.opcode.as_ref(), b.operands.as_slice()) {
        ("bra", [crate::ast::Operand::Name(l)]) => l,
        _ => return None,
    };
    let mut end = k + 1;
    loop {
        if end >= body.len() || end - k - 1 > MAX_BLOCK {
            return None;
        }
        match &body[end] {
            Stmt::Label(l, _) if l == target => break,
            Stmt::Inst(i) if predicable(i) => end += 1,
            _ => return None,
        }
    }
    // What else would keep the block a branch, asked only of one that ends at its label
    // (most guarded branches do not: a loop's back-edge, a jump over a long stretch): its
    // `.local` accesses, and an instruction that writes the guard, which would change it for
    // the rest of the block once the block runs under it (`@!p setp p, …` then `@!p st …`).
    let keep = body[k + 1..end].iter().any(|s| match s {
        Stmt::Inst(i) => local_access(i) || super::group::writes(i, p),
        _ => false,
    });
    (end > k + 1 && !keep).then(|| (end, (p.clone(), !neg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(body: &str) -> Module<'static> {
        let text = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a)\n{{\n\
             .reg .b64 %rd<4>;\n.reg .b32 %r<4>;\n.reg .pred %p<3>;\n{body}\n}}\n"
        );
        let m = crate::parse::parse(&crate::lex::lex(&text).unwrap()).unwrap();
        m.into_owned()
    }

    fn printed(m: &Module<'_>) -> String {
        crate::sandbox::print::module(m).unwrap()
    }

    #[test]
    fn a_short_guarded_block_becomes_predicated_and_its_label_stays() {
        let mut m = module(
            "ld.param.u64 %rd1, [a];\nsetp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\n\
             ld.global.u32 %r2, [%rd1];\nst.global.u32 [%rd1+4], %r2;\nL:\nret;",
        );
        assert_eq!(apply(&mut m), 1);
        let t = printed(&m);
        assert!(!t.contains("bra"), "{t}");
        assert!(t.contains("@!%p1 ld.global.u32"), "{t}");
        assert!(t.contains("@!%p1 st.global.u32"), "{t}");
        assert!(t.contains("L:"), "{t}");
    }

    #[test]
    fn blocks_touching_local_memory_stay_branches() {
        for inner in [
            "st.local.u32 [%rd1], %r2;\nmov.u64 %rd2, %rd1;",
            "ld.local.u32 %r2, [%rd1];\nst.global.u32 [%rd2], %r2;",
        ] {
            let mut m = module(&format!(
                "setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\n{inner}\nL:\nret;"
            ));
            assert_eq!(apply(&mut m), 0, "{inner}");
        }
        let mut m =
            module("setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\nld.shared.u32 %r2, [%r1];\nL:\nret;");
        assert_eq!(apply(&mut m), 1, "a shared access converts");
    }

    #[test]
    fn blocks_with_labels_calls_barriers_guards_or_carries_stay_branches() {
        for inner in [
            "add.u32 %r2, %r2, 1;\nM:\nadd.u32 %r2, %r2, 1;",
            "bar.sync 0;",
            "@%p2 add.u32 %r2, %r2, 1;",
            "add.cc.u32 %r2, %r2, 1;",
            "shfl.sync.bfly.b32 %r2, %r2, 1, 31, -1;",
        ] {
            let mut m = module(&format!(
                "setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\nst.global.u32 [%rd1], %r2;\n{inner}\nL:\nret;"
            ));
            assert_eq!(apply(&mut m), 0, "{inner}");
        }
    }

    #[test]
    fn a_block_that_writes_its_own_guard_stays_a_branch() {
        // Found by the generated-kernel tests (tests/all/generated.rs, seed 544): converted, the
        // store after the setp ran under the setp's result, not the branch's.
        for inner in [
            "setp.le.u32 %p1, %r2, %r3;\nst.global.u32 [%rd1], %r2;",
            "setp.le.u32 %p2|%p1, %r2, %r3;\nst.global.u32 [%rd1], %r2;",
        ] {
            let mut m = module(&format!(
                "setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\n{inner}\nL:\nret;"
            ));
            assert_eq!(apply(&mut m), 0, "{inner}");
        }
        let mut m =
            module("setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\nsetp.le.u32 %p2, %r2, %r3;\nL:\nret;");
        assert_eq!(
            apply(&mut m),
            1,
            "another predicate is written as any register"
        );
    }

    #[test]
    fn a_block_longer_than_the_limit_stays_a_branch() {
        let block = |adds: usize| {
            let adds = "add.u32 %r2, %r2, 1;\n".repeat(adds);
            module(&format!(
                "setp.ge.s32 %p1, %r1, 4;\n@%p1 bra L;\n{adds}st.global.u32 [%rd1], %r2;\nL:\nret;"
            ))
        };
        assert_eq!(apply(&mut block(MAX_BLOCK)), 0);
        assert_eq!(apply(&mut block(MAX_BLOCK - 1)), 1);
    }
}
