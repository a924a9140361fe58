//! The module-scope names a function refers to. A name declared inside the function (parameter,
//! register, variable, label) shadows a module symbol from its declaration on, in its block and
//! the blocks inside, as lowering resolves names; a `%r<n>` range declares `%r0`..`%r{n-1}`.

use std::collections::HashSet;

use crate::ast::{Func, Operand, Stmt, Str};

/// Names declared in one block.
#[derive(Default)]
struct Scope {
    names: HashSet<String>,
    ranges: Vec<(String, u32)>,
}

impl Scope {
    fn declares(&self, name: &str) -> bool {
        self.names.contains(name)
            || self.ranges.iter().any(|(prefix, n)| {
                // Lowering names them `{prefix}{i}`: decimal, no sign, no leading zero.
                name.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                    rest.parse::<u32>()
                        .is_ok_and(|i| i < *n && i.to_string() == rest)
                })
            })
    }
}

/// Calls `visit` on every operand name in `f`'s body that refers to module scope (a function, a
/// module variable, or an undeclared name); `visit` may rename it.
pub(super) fn visit(f: &mut Func<'static>, visit: &mut impl FnMut(&mut Str<'static>)) {
    let Some(body) = &mut f.body else { return };
    let mut top = Scope::default();
    for p in f.params.iter().chain(&f.rets) {
        top.names.insert(p.name.to_string());
    }
    labels(body, &mut top.names);
    let mut scopes = vec![top];
    block(body, &mut scopes, visit);
}

/// Labels and branch tables: they name places in the function, wherever declared.
fn labels(body: &[Stmt], out: &mut HashSet<String>) {
    for s in body {
        match s {
            Stmt::Label(l, _) | Stmt::Targets(l, _, _) => {
                out.insert(l.to_string());
            }
            Stmt::Block(b) => labels(b, out),
            _ => {}
        }
    }
}

fn block(
    body: &mut [Stmt<'static>],
    scopes: &mut Vec<Scope>,
    visit: &mut impl FnMut(&mut Str<'static>),
) {
    for s in body {
        let top = scopes.len() - 1;
        match s {
            Stmt::Reg { names, .. } => {
                for (n, range) in names.iter() {
                    match range {
                        None => scopes[top].names.insert(n.to_string()),
                        Some(c) => {
                            scopes[top].ranges.push((n.to_string(), *c));
                            true
                        }
                    };
                }
            }
            Stmt::Var(v) => {
                scopes[top].names.insert(v.name.to_string());
            }
            Stmt::Inst(i) => {
                for o in &mut i.operands {
                    operand(o, scopes, visit);
                }
            }
            Stmt::Block(b) => {
                scopes.push(Scope::default());
                block(b, scopes, visit);
                scopes.pop();
            }
            Stmt::Label(..) | Stmt::Targets(..) => {}
        }
    }
}

fn operand(o: &mut Operand<'static>, scopes: &[Scope], visit: &mut impl FnMut(&mut Str<'static>)) {
    match o {
        Operand::Name(n) | Operand::Addr(Some(n), _) if !scopes.iter().any(|s| s.declares(n)) => {
            visit(n);
        }
        Operand::Vec(v) | Operand::List(v) => {
            for x in v {
                operand(x, scopes, visit);
            }
        }
        _ => {}
    }
}
