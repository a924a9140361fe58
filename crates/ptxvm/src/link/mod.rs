//! Linking several PTX modules into one, as cuLink* does for separately compiled device code
//! (`nvcc -rdc=true`, NVRTC `-rdc`): an `.extern` function or variable resolves to the `.visible`
//! (or `.weak`) definition of another module, a `.weak` definition yields to a strong one, and
//! symbols without external linkage stay private to their module (renamed in the merged module
//! where another module uses the name). Linking happens on the syntax tree: each input is parsed,
//! the trees are merged and the result is printed as one module, which `Module::load` accepts.
//!
//! Errors follow NVIDIA's linker: a second strong definition is refused when its module is
//! added, an extern that no module defines when the link completes.

mod names;

use std::collections::{HashMap, HashSet};

use crate::ast::{Func, Inst, Module, Space, Stmt, Str, VarDecl};
use crate::error::Error;
use crate::lower::{ASSERT_FAIL, VPRINTF};

/// Functions the driver provides: an `.extern` declaration of one needs no definition.
const DRIVER_FUNCS: [&str; 4] = [VPRINTF, ASSERT_FAIL, "malloc", "free"];

/// How a module-scope name is bound in one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bind {
    /// No external linkage: the module's own.
    Private,
    /// `.extern .shared`: the launch's dynamic shared memory, never defined.
    Dynamic,
    /// A declaration that another module (or the driver) defines.
    Extern,
    /// A `.weak` (or `.common`) definition.
    Weak,
    /// A `.visible` definition.
    Strong,
}

/// Whether a name is a function or a variable (they share one namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Func,
    Var,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Func => "a function",
            Kind::Var => "a variable",
        }
    }
}

fn func_bind(f: &Func) -> Bind {
    match (f.linkage.as_deref(), f.body.is_some()) {
        (None, _) => Bind::Private,
        (Some("visible"), true) => Bind::Strong,
        (Some("weak" | "common"), true) => Bind::Weak,
        _ => Bind::Extern,
    }
}

fn var_bind(v: &VarDecl) -> Bind {
    match (v.is_extern, v.space, v.linkage.as_deref()) {
        (true, Space::Shared, _) => Bind::Dynamic,
        (true, _, _) => Bind::Extern,
        (false, _, Some("visible")) => Bind::Strong,
        (false, _, Some(_)) => Bind::Weak,
        (false, _, None) => Bind::Private,
    }
}

/// Every module-scope name of `m` with its kind and strongest binding.
fn symbols(m: &Module) -> HashMap<String, (Kind, Bind)> {
    let mut out: HashMap<String, (Kind, Bind)> = HashMap::new();
    let funcs = m.funcs.iter().map(|f| (&f.name, Kind::Func, func_bind(f)));
    let vars = m.vars.iter().map(|v| (&v.name, Kind::Var, var_bind(v)));
    for (name, kind, bind) in funcs.chain(vars) {
        let e = out.entry(name.to_string()).or_insert((kind, bind));
        e.1 = e.1.max(bind);
    }
    out
}

/// The `sm_XX` number of a `.target` list, if it names one.
fn arch(target: &[String]) -> u32 {
    target
        .iter()
        .find_map(|w| crate::arch_number(w))
        .unwrap_or(0)
}

/// `.version` as (major, minor), for picking the highest.
fn version(m: &Module) -> (u32, u32) {
    let v = m.version.as_deref().unwrap_or("0.0");
    let (a, b) = v.split_once('.').unwrap_or((v, "0"));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}

/// One added module.
struct Input {
    name: String,
    /// Owned: the linker outlives the text each module was added from.
    module: Module<'static>,
}

/// The definition a global name resolves to.
#[derive(Debug, Clone, Copy)]
struct Def {
    input: usize,
    kind: Kind,
    bind: Bind,
    /// A `.common` variable's size: of several, the largest is the definition.
    common: Option<u64>,
}

/// A link in progress: modules added so far and what their global names resolve to.
#[derive(Default)]
pub struct Linker {
    inputs: Vec<Input>,
    /// Every global (non-private) name: its kind, the first module naming it, and the winning
    /// definition once there is one.
    globals: HashMap<String, (Kind, usize, Option<Def>)>,
}

impl std::fmt::Debug for Linker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
        f.debug_struct("Linker").field("inputs", &names).finish()
    }
}

impl Linker {
    /// An empty link.
    pub fn new() -> Linker {
        Linker::default()
    }

    /// Whether no module was added.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Adds the PTX module `ptx`, called `name` in messages. Refuses text `Module::load` would
    /// refuse (its own externs aside), a module whose `.address_size` differs from the first's,
    /// and a symbol defined (strongly) by an earlier module or declared there as the other kind;
    /// a refused module is not added.
    pub fn add(&mut self, name: &str, ptx: &str) -> Result<(), Error> {
        let tokens = crate::lex::lex(ptx)?;
        let mut module = crate::parse::parse(&tokens)?;
        check_alone(&mut module)?;
        if let Some(first) = self.inputs.first() {
            let (a, b) = (
                first.module.address_size.unwrap_or(64),
                module.address_size.unwrap_or(64),
            );
            if a != b {
                return Err(Error::Incompatible {
                    input: name.into(),
                    what: format!(
                        ".address_size {b} where '{}' has {a}; compile every module for one \
                         address size",
                        first.name
                    ),
                });
            }
        }
        let index = self.inputs.len();
        let syms = symbols(&module);
        let commons: HashMap<&str, u64> = module
            .vars
            .iter()
            .filter(|v| v.linkage.as_deref() == Some("common"))
            .map(|v| {
                (
                    v.name.as_ref(),
                    crate::lower::var_size(v).map_or(0, |s| s.0),
                )
            })
            .collect();
        let mut updates = Vec::new();
        for (sym, &(kind, bind)) in &syms {
            let sym = sym.as_str();
            if bind == Bind::Private {
                continue;
            }
            let Some(&(first_kind, first, def)) = self.globals.get(sym) else {
                updates.push((sym, kind, bind));
                continue;
            };
            let first_name = &self.inputs[first].name;
            if first_kind != kind {
                return Err(Error::Conflict {
                    symbol: sym.into(),
                    input: name.into(),
                    first: first_name.clone(),
                    what: format!(
                        "Kind mismatch ({} here, {} there)",
                        kind.word(),
                        first_kind.word()
                    ),
                });
            }
            if let Some(d) = def
                && bind == Bind::Strong
                && d.bind == Bind::Strong
            {
                return Err(Error::Conflict {
                    symbol: sym.into(),
                    input: name.into(),
                    first: self.inputs[d.input].name.clone(),
                    what: "Multiple definition".into(),
                });
            }
            updates.push((sym, kind, bind));
        }
        for (sym, kind, bind) in updates {
            let e = self
                .globals
                .entry(sym.to_string())
                .or_insert((kind, index, None));
            let defines = matches!(bind, Bind::Weak | Bind::Strong);
            let common = commons.get(sym).copied();
            // A strong definition beats a weak one; among weak ones the first stays, except
            // that a larger `.common` variable replaces a smaller one.
            let wins = e.2.is_none_or(|d| {
                d.bind < bind
                    || (d.bind == bind && d.common.zip(common).is_some_and(|(old, new)| new > old))
            });
            if defines && wins {
                e.2 = Some(Def {
                    input: index,
                    kind,
                    bind,
                    common,
                });
            }
        }
        self.inputs.push(Input {
            name: name.into(),
            module: module.into_owned(),
        });
        Ok(())
    }

    /// Links the added modules into one PTX text: `.version` the highest of the inputs', the
    /// `.target` of the input with the highest architecture. An extern that a module uses and
    /// no module defines is `Error::Undefined`.
    pub fn link(self) -> Result<String, Error> {
        let merged = self.merge()?;
        crate::lower::lower(&merged)?;
        crate::sandbox::print::module(&merged)
    }

    fn merge(self) -> Result<Module<'static>, Error> {
        let all: HashSet<String> = self
            .inputs
            .iter()
            .flat_map(|i| symbols(&i.module).into_keys())
            .collect();
        let mut used: HashSet<String> = self.globals.keys().cloned().collect();
        let mut out = Module {
            address_size: self.inputs.first().and_then(|i| i.module.address_size),
            ..Module::default()
        };
        let mut best_arch = None;
        let mut declared: HashSet<String> = HashSet::new();
        for (index, input) in self.inputs.into_iter().enumerate() {
            let Input { name, mut module } = input;
            if version(&module) > version(&out) {
                out.version = module.version.take();
            }
            let a = arch(&module.target);
            if best_arch.is_none_or(|b| a > b) {
                best_arch = Some(a);
                out.target = std::mem::take(&mut module.target);
            }
            let syms = symbols(&module);
            // Private names another module also uses get a fresh name.
            let mut renames: HashMap<String, String> = HashMap::new();
            let mut privates: Vec<&str> = syms
                .iter()
                .filter(|(_, s)| s.1 == Bind::Private)
                .map(|(n, _)| n.as_str())
                .collect();
            privates.sort_unstable();
            for p in privates {
                if used.insert(p.to_string()) {
                    continue;
                }
                let fresh = (0u32..)
                    .map(|k| match k {
                        0 => format!("{p}$L{index}"),
                        _ => format!("{p}$L{index}_{k}"),
                    })
                    .find(|n| !all.contains(n) && !used.contains(n))
                    .unwrap_or_default();
                used.insert(fresh.clone());
                renames.insert(p.to_string(), fresh);
            }
            let mut referenced: HashSet<String> = HashSet::new();
            for f in &mut module.funcs {
                names::visit(f, &mut |n: &mut Str<'static>| {
                    if let Some(new) = renames.get(n.as_ref()) {
                        *n = new.clone().into();
                    } else {
                        referenced.insert(n.to_string());
                    }
                });
            }
            let winner = |sym: &str| self.globals.get(sym).and_then(|g| g.2);
            for (sym, &(_, bind)) in &syms {
                if bind == Bind::Extern
                    && winner(sym).is_none()
                    && referenced.contains(sym)
                    && !DRIVER_FUNCS.contains(&sym.as_str())
                {
                    return Err(Error::Undefined {
                        symbol: sym.clone(),
                        input: name,
                    });
                }
            }
            for mut v in std::mem::take(&mut module.vars) {
                match var_bind(&v) {
                    Bind::Dynamic => {
                        if let Some(d) = out.vars.iter_mut().find(|d| d.name == v.name) {
                            d.align = d.align.max(v.align);
                            continue;
                        }
                    }
                    Bind::Extern => continue,
                    Bind::Weak | Bind::Strong => {
                        if winner(&v.name).is_none_or(|d| d.input != index) {
                            continue;
                        }
                    }
                    Bind::Private => {
                        if let Some(new) = renames.get(v.name.as_ref()) {
                            v.name = new.clone().into();
                        }
                    }
                }
                out.vars.push(v);
            }
            for mut f in std::mem::take(&mut module.funcs) {
                match func_bind(&f) {
                    Bind::Extern => {
                        // One prototype per name keeps calls before the definition valid PTX;
                        // it takes the linkage of the definition it resolves to.
                        let def = winner(&f.name);
                        let keep = match def {
                            Some(d) => d.input != index && d.kind == Kind::Func,
                            None => DRIVER_FUNCS.contains(&f.name.as_ref()),
                        };
                        if !keep || !declared.insert(f.name.to_string()) {
                            continue;
                        }
                        if let Some(d) = def {
                            f.linkage = Some(
                                if d.bind == Bind::Strong {
                                    "visible"
                                } else {
                                    "weak"
                                }
                                .into(),
                            );
                        }
                    }
                    Bind::Weak | Bind::Strong => {
                        if winner(&f.name).is_none_or(|d| d.input != index) {
                            continue;
                        }
                    }
                    Bind::Private | Bind::Dynamic => {
                        if let Some(new) = renames.get(f.name.as_ref()) {
                            f.name = new.clone().into();
                        }
                    }
                }
                out.funcs.push(f);
            }
        }
        Ok(out)
    }
}

/// Lowers a module on its own, its externs stood in for by empty definitions, so that an
/// input ptxvm cannot run is refused when added (NVIDIA compiles PTX inputs then). That also
/// refuses address-valued initialisers, which the printer could not carry.
fn check_alone(m: &mut Module) -> Result<(), Error> {
    let defined: HashSet<String> = m
        .funcs
        .iter()
        .filter(|f| f.body.is_some())
        .map(|f| f.name.to_string())
        .collect();
    let mut stubbed = Vec::new();
    for (i, f) in m.funcs.iter_mut().enumerate() {
        if func_bind(f) == Bind::Extern
            && !defined.contains(f.name.as_ref())
            && !DRIVER_FUNCS.contains(&f.name.as_ref())
        {
            f.body = Some(vec![Stmt::Inst(Inst {
                guard: None,
                opcode: "ret".into(),
                op: Some(crate::isa::Opcode::Ret),
                mods: Default::default(),
                operands: Default::default(),
                line: f.line,
            })]);
            stubbed.push(i);
        }
    }
    let mut externs = Vec::new();
    for (i, v) in m.vars.iter_mut().enumerate() {
        if var_bind(v) == Bind::Extern {
            externs.push((i, v.count));
            v.is_extern = false;
            if v.count == Some(0) {
                v.count = Some(1);
            }
        }
    }
    let result = crate::lower::lower(m).map(drop);
    for i in stubbed {
        m.funcs[i].body = None;
    }
    for (i, count) in externs {
        m.vars[i].is_extern = true;
        m.vars[i].count = count;
    }
    result
}

#[cfg(test)]
mod tests;
