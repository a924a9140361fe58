//! Registers that can only hold the address of one of the function's own `.local` variables
//! plus one of a few known offsets: nvcc's `mov.u64 %SPL, __local_depot0; add.u64 %rd1, %SPL,
//! 4; … st.local.u32 [%rd1]` (an unrolled sort on a local array). A `.local` access through
//! such a register whose every offset lies inside the variable, aligned to the access, needs no
//! window check. The analysis is flow-insensitive: a register qualifies when every instruction
//! that writes it is `mov` of a variable, `mov` of a qualifying register or `add` of a constant
//! to one, all about the same variable; its value set is the union over those writes (a few
//! dozen offsets at most: a register stepped in a loop is not static). A read before any write
//! would see an undefined value, so the function starts by setting every such register to one
//! of its values (`inits`); ptxas drops those where a write always comes first.

use super::hash::{HashMap, HashMapExt};

use super::group::written_regs;
use super::names::same;
use crate::ast::{Inst, Operand};
use crate::isa::Opcode;

/// Most offsets one register may have.
const MAX_VALUES: usize = 64;

/// A register's possible values: `var + k` for each `k`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Static<'m> {
    pub var: &'m str,
    /// Sorted, each once: a few dozen at most, so searched by halves (a BTreeSet's nodes cost
    /// more to build, search and drop than this pass's other work).
    pub offsets: Vec<i64>,
}

enum Def<'m> {
    Var(&'m str),
    Reg(&'m str, i64),
}

/// Most `.local` variables looked for by comparing names rather than by hashing.
const FEW_LOCALS: usize = 4;

/// The function's `.local` variables, asked about the source of every `mov` of a register: a
/// function has one or two, compared (lengths first) for less than the hash of the name.
enum Locals<'a, 'm> {
    Few(Vec<&'m str>),
    Many(&'a HashMap<&'m str, u64>),
}

impl Locals<'_, '_> {
    fn has(&self, n: &str) -> bool {
        match self {
            Locals::Few(v) => v.contains(&n),
            Locals::Many(m) => m.contains_key(n),
        }
    }
}

/// How `i` sets `r`, if it is one of the static forms.
fn def_of<'m>(i: &'m Inst<'m>, r: &str, locals: &Locals<'_, '_>) -> Option<Def<'m>> {
    // Only a `mov` or an `add` is one (most instructions are neither: one compare rejects them).
    if !matches!(i.op, Some(Opcode::Mov | Opcode::Add)) {
        return None;
    }
    let wide = i.mods.len() == 1 && matches!(i.mods[0].as_ref(), "u64" | "s64" | "b64");
    if !wide || !matches!(i.operands.first(), Some(Operand::Name(d)) if same(d, r)) {
        return None;
    }
    match (i.op, &i.operands[1..]) {
        (Some(Opcode::Mov), [Operand::Name(v)]) if locals.has(v) => Some(Def::Var(v.as_ref())),
        (Some(Opcode::Mov), [Operand::Name(s)]) if s.starts_with('%') => {
            Some(Def::Reg(s.as_ref(), 0))
        }
        (
            Some(Opcode::Add),
            [Operand::Name(s), Operand::Int(k)] | [Operand::Int(k), Operand::Name(s)],
        ) if s.starts_with('%') => Some(Def::Reg(s.as_ref(), *k)),
        _ => None,
    }
}

/// A body's instructions and nested declarations, gathered once (by `Fx::scan`, in its walk
/// over the body) for this pass and bounds.rs, which each walked the body for them.
#[derive(Default)]
pub(crate) struct Flat<'m> {
    /// Every instruction, nested blocks included, in order.
    pub insts: Vec<&'m Inst<'m>>,
    /// Registers declared inside nested blocks (they may shadow the function's): never static.
    pub nested: Vec<(&'m str, Option<u32>)>,
}

impl Flat<'_> {
    /// Room for a body of `n` statements' instructions.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Flat {
            insts: Vec::with_capacity(n),
            nested: Vec::new(),
        }
    }
}

fn covers(decl: &(&str, Option<u32>), r: &str) -> bool {
    match decl.1 {
        None => decl.0 == r,
        Some(c) => r
            .strip_prefix(decl.0)
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n < c),
    }
}

/// A candidate's write, its source numbered: a variable's address, or a candidate's value (by
/// its number; `None`: a register that is no candidate) plus a constant.
#[derive(Clone, Copy)]
enum Src<'m> {
    Var(&'m str),
    Reg(Option<usize>, i64),
}

/// The static registers of a body. `wide(r)`: whether `r` is a 64-bit register the function
/// declares.
pub(crate) fn analyse<'m>(
    flat: &Flat<'m>,
    locals: &HashMap<&'m str, u64>,
    wide: impl Fn(&str) -> bool,
) -> HashMap<&'m str, Static<'m>> {
    if locals.is_empty() {
        return HashMap::new();
    }
    let locals = if locals.len() <= FEW_LOCALS {
        Locals::Few(locals.keys().copied().collect())
    } else {
        Locals::Many(locals)
    };
    let (all, shadowed) = (flat.insts.as_slice(), flat.nested.as_slice());
    // Candidates: registers that some instruction sets to a variable's address. With them,
    // in the same pass, the copies and constant adds through which the candidates grow: those
    // instructions found once, then only they are gone over again (in order) until nothing
    // grows. Each candidate is numbered once found: the fixpoints below look registers up by
    // number, not by name (hashing and comparing names was most of this pass's time).
    let mut ids: HashMap<&'m str, usize> = HashMap::new();
    let mut names: Vec<&'m str> = Vec::new();
    let mut number = |r: &'m str, ids: &mut HashMap<&'m str, usize>| {
        ids.entry(r).or_insert_with(|| {
            names.push(r);
            names.len() - 1
        });
    };
    let mut copies: Vec<(&'m str, &'m str)> = Vec::new();
    // How many instructions are of a static form: no candidate has more writes kept below.
    let mut forms = 0;
    for &i in all {
        // `def_of`'s first test, here: most instructions fail it, and then skip the call.
        if !matches!(i.op, Some(Opcode::Mov | Opcode::Add)) {
            continue;
        }
        let Some(Operand::Name(r)) = i.operands.first() else {
            continue;
        };
        let d = def_of(i, r, &locals);
        forms += usize::from(d.is_some());
        match d {
            Some(Def::Var(_)) => number(r.as_ref(), &mut ids),
            Some(Def::Reg(s, _)) => copies.push((r.as_ref(), s)),
            None => {}
        }
    }
    loop {
        let before = ids.len();
        // A copy into a candidate is done with: only the others are gone over again.
        copies.retain(|&(r, s)| {
            if ids.contains_key(r) {
                return false;
            }
            if ids.contains_key(s) {
                number(r, &mut ids);
                return false;
            }
            true
        });
        if ids.len() == before {
            break;
        }
    }
    let n = names.len();
    // No register is ever set to a variable's address: none is static.
    if n == 0 {
        return HashMap::new();
    }
    let mut bad: Vec<bool> = names
        .iter()
        .map(|r| !wide(r) || shadowed.iter().any(|x| covers(x, r)))
        .collect();
    // Every write of a candidate, in order, in one pass over the body (not one per candidate);
    // a write of another form disqualifies it.
    let mut writes: Vec<(usize, Src<'m>)> = Vec::with_capacity(forms);
    let mut written = Vec::new();
    for &i in all {
        written.clear();
        written_regs(i, &mut written);
        for &r in &written {
            // Most registers are no candidate: one lookup settles those.
            let Some(&k) = ids.get(r) else {
                continue;
            };
            if bad[k] {
                continue;
            }
            match def_of(i, r, &locals) {
                Some(Def::Var(v)) => writes.push((k, Src::Var(v))),
                Some(Def::Reg(s, o)) => writes.push((k, Src::Reg(ids.get(s).copied(), o))),
                None => bad[k] = true,
            }
        }
    }
    // Grouped by candidate into one array (a counting sort, order kept): a Vec per candidate
    // was regrown write by write.
    let mut start = vec![0usize; n + 1];
    for &(k, _) in &writes {
        start[k + 1] += 1;
    }
    for k in 0..n {
        start[k + 1] += start[k];
    }
    let mut next = start.clone();
    let mut flat = vec![Src::Reg(None, 0); writes.len()];
    for &(k, x) in &writes {
        flat[next[k]] = x;
        next[k] += 1;
    }
    let defs = |k: usize| &flat[start[k]..start[k + 1]];
    let mut vals: Vec<Option<Static<'m>>> = vec![None; n];
    let mut added: Vec<i64> = Vec::new();
    for _ in 0..=MAX_VALUES + 1 {
        let mut changed = false;
        for k in 0..n {
            if bad[k] {
                continue;
            }
            // What the writes add to the register's set, found without copying the set: most
            // rounds add nothing to most registers.
            let cur = vals[k].as_ref();
            let have = cur.map_or(0, |st| st.offsets.len());
            let mut var = cur.map(|st| st.var);
            added.clear();
            let mut is_bad = false;
            for x in defs(k) {
                let (v, src, off) = match *x {
                    Src::Var(v) => (v, None, 0),
                    Src::Reg(None, _) => {
                        is_bad = true;
                        break;
                    }
                    Src::Reg(Some(j), _) if bad[j] => {
                        is_bad = true;
                        break;
                    }
                    Src::Reg(Some(j), off) => match &vals[j] {
                        Some(st) => (st.var, Some(&st.offsets), off),
                        None => continue,
                    },
                };
                if !same(var.get_or_insert(v), v) {
                    is_bad = true;
                    break;
                }
                let mut add = |o: i64| {
                    if cur.is_none_or(|st| st.offsets.binary_search(&o).is_err())
                        && let Err(at) = added.binary_search(&o)
                    {
                        added.insert(at, o);
                    }
                };
                match src {
                    None => add(0),
                    Some(offsets) => offsets.iter().for_each(|o| add(o.wrapping_add(off))),
                }
                if have + added.len() > MAX_VALUES {
                    is_bad = true;
                    break;
                }
            }
            if is_bad {
                bad[k] = true;
                changed |= vals[k].take().is_some();
                continue;
            }
            if let Some(v) = var
                && (cur.is_none() || !added.is_empty())
            {
                // `v` is the set's variable when it has one (another would have been bad).
                let st = vals[k].get_or_insert_with(|| Static {
                    var: v,
                    offsets: Vec::new(),
                });
                st.offsets.extend_from_slice(&added);
                st.offsets.sort_unstable();
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Keep only what the writes justify: every write's values are in the register's set.
    loop {
        let wrong: Vec<usize> = (0..n)
            .filter(|&k| {
                vals[k].as_ref().is_some_and(|st| {
                    bad[k]
                        || defs(k).iter().any(|x| match *x {
                            Src::Var(v) => {
                                !same(v, st.var) || st.offsets.binary_search(&0).is_err()
                            }
                            Src::Reg(s, off) => {
                                s.and_then(|j| vals[j].as_ref()).is_none_or(|src| {
                                    !same(src.var, st.var)
                                        || src.offsets.iter().any(|o| {
                                            st.offsets.binary_search(&o.wrapping_add(off)).is_err()
                                        })
                                })
                            }
                        })
                })
            })
            .collect();
        if wrong.is_empty() {
            break;
        }
        for k in wrong {
            vals[k] = None;
        }
    }
    names
        .into_iter()
        .zip(vals)
        .filter_map(|(r, st)| Some((r, st?)))
        .collect()
}
