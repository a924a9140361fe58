//! Lowering: `ast::Module` → decoded kernels. Resolves names to registers and memory offsets,
//! lays out shared/local/param storage, inlines nothing (device functions are laid out after the
//! kernel body and reached with `Call`), and resolves labels to instruction indices.

mod control;
mod forms;
mod inst;
mod matrix;
mod mbarrier;
mod memory;
mod mods;
mod operand;
mod texture;
mod wmma;

use std::collections::HashMap;

use crate::api::{GlobalInfo, GlobalSpace, KernelInfo, ParamInfo};
use crate::ast::{self, Init, Space as ASpace, Stmt, VarDecl};
use crate::error::Error;
use crate::ir::{ControlOp, Inst, Kernel, Op, Preload, Reg, Ty};

/// CUDA's device-side `assert` failure hook: an external function the driver provides; here
/// a call to it traps, as a failed assert does on the GPU.
pub(crate) const ASSERT_FAIL: &str = "__assertfail";

/// CUDA's device `printf`: the compiler calls this external function with the format string
/// and a packed argument buffer; the VM formats and records the output.
pub(crate) const VPRINTF: &str = "vprintf";

/// Most registers a kernel (with its callees) may declare.
const MAX_REGS: u32 = 1 << 18;
/// Largest initial image of one global (as far as its initialiser reaches): built in memory at
/// load.
pub(crate) const MAX_INIT_BYTES: u64 = 64 << 20;
/// Most bytes of static storage (shared, local, a global) one declaration may ask for.
const MAX_STORAGE: u64 = 1 << 30;

type R<T> = Result<T, Error>;

/// What a name means inside a function.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sym {
    Reg(Reg, Ty),
    /// Per-thread local memory offset (locals, function params, call-site param variables).
    Local(u32),
    /// Shared-space offset.
    Shared(u32),
    /// Dynamic (`.extern .shared`) shared memory: its offset is only known at launch.
    DynShared,
    /// Module global number n.
    Global(u32),
    /// Offset in the kernel parameter buffer.
    KParam(u32),
}

/// A device function's frame: where its params and results live in local memory.
#[derive(Debug, Clone)]
struct Frame {
    params: Vec<(u32, u32)>,
    rets: Vec<(u32, u32)>,
}

/// Lowering state for one kernel and its callees.
pub(crate) struct Ctx<'m> {
    module: &'m ast::Module<'m>,
    globals: &'m HashMap<String, u32>,
    scopes: Vec<HashMap<String, Sym>>,
    code: Vec<Inst>,
    nregs: u32,
    preloads: Vec<(Reg, Preload)>,
    preload_map: HashMap<Preload, Reg>,
    sink: Reg,
    local_bytes: u64,
    /// Local ranges (offset, bytes) of the `.param` variables declared in function bodies: a
    /// call's arguments and results, which no guard may read or write (ptxas refuses it).
    call_params: Vec<(u32, u32)>,
    shared_bytes: u64,
    module_shared: HashMap<String, u32>,
    frames: HashMap<String, Frame>,
    /// Branch fix-ups: (instruction index, label name, line) for the current function.
    label_fixups: Vec<(usize, String, u32)>,
    labels: HashMap<String, u32>,
    /// `brx.idx` fix-ups: (instruction index, table name, line) for the current function.
    brx_fixups: Vec<(usize, String, u32)>,
    /// Branch tables of the current function.
    tables: HashMap<String, Vec<String>>,
    /// Call fix-ups: (instruction index, callee name).
    call_fixups: Vec<(usize, String)>,
    /// Where the current instruction came from.
    line: u32,
    /// Size of the kernel parameter buffer.
    kparam_bytes: u32,
    /// Hidden carry-flag register, allocated by the first `.cc` instruction.
    cc: Option<Reg>,
}

/// Lowers every kernel of a module; also returns the module's globals.
pub(crate) fn lower(m: &ast::Module) -> R<(Vec<Kernel>, Vec<GlobalInfo>)> {
    let mut globals = Vec::new();
    let mut gmap = HashMap::new();
    for v in &m.vars {
        let space = match v.space {
            ASpace::Global => GlobalSpace::Global,
            ASpace::Const => GlobalSpace::Const,
            ASpace::Shared => continue,
            _ => {
                return Err(Error::Unsupported {
                    line: v.line,
                    what: "module-scope .local/.param variables".into(),
                });
            }
        };
        if v.is_extern {
            return Err(Error::Unsupported {
                line: v.line,
                what: format!(
                    "external variable {} in a module loaded alone; link it with the module \
                     that defines it (cuLink*, ptxvm::link)",
                    v.name
                ),
            });
        }
        let (size, align) = var_size(v)?;
        let init = init_bytes(v, size)?;
        gmap.insert(v.name.to_string(), globals.len() as u32);
        globals.push(GlobalInfo {
            name: v.name.to_string(),
            space,
            size,
            align,
            init,
        });
    }
    // A name defined twice is invalid PTX (NVIDIA's JIT refuses the module): without this, a
    // launch by name would run whichever definition came first.
    let mut defined = std::collections::HashSet::new();
    for f in m.funcs.iter().filter(|f| f.body.is_some()) {
        if !defined.insert(f.name.as_ref()) {
            return Err(Error::Invalid {
                line: f.line,
                msg: format!("function {} defined twice", f.name),
            });
        }
    }
    let mut kernels = Vec::new();
    for f in m.funcs.iter().filter(|f| f.is_entry) {
        if f.body.is_none() {
            continue;
        }
        kernels.push(lower_kernel(m, &gmap, f)?);
    }
    Ok((kernels, globals))
}

/// Size and alignment of a declared variable.
pub(crate) fn var_size(v: &VarDecl) -> R<(u64, u32)> {
    let Some(ty) = Ty::parse(&v.ty) else {
        return Err(Error::Unsupported {
            line: v.line,
            what: format!("variable type .{}", v.ty),
        });
    };
    let elem = u64::from(ty.bytes()) * u64::from(v.vec);
    let size = elem.saturating_mul(v.count.unwrap_or(1));
    if size > MAX_STORAGE {
        return Err(Error::TooLarge {
            bytes: usize::try_from(size).unwrap_or(usize::MAX),
        });
    }
    let align = v.align.unwrap_or(elem as u32).max(1);
    if !align.is_power_of_two() {
        return Err(Error::Invalid {
            line: v.line,
            msg: format!("alignment {align} of {} is not a power of two", v.name),
        });
    }
    Ok((size, align))
}

/// The initial image of `v`, a variable of `size` bytes: as far as its initialiser reaches (the
/// bytes past it are zero), so its length is bounded by the text's, never by the declared size
/// (`.b8 a[1 << 30] = {1}` is one byte of image, not a GiB).
pub(crate) fn init_bytes(v: &VarDecl, size: u64) -> R<Vec<u8>> {
    if v.init.is_empty() {
        return Ok(Vec::new());
    }
    let ty = Ty::parse(&v.ty).unwrap_or(Ty::B8);
    let eb = ty.bytes() as usize;
    let extent = v.init.len().saturating_mul(eb);
    if extent as u64 > size {
        return Err(Error::Invalid {
            line: v.line,
            msg: format!("initialiser of {} is larger than the variable", v.name),
        });
    }
    if extent as u64 > MAX_INIT_BYTES {
        return Err(Error::TooLarge { bytes: extent });
    }
    if v.init.iter().any(|x| matches!(x, Init::Symbol)) {
        return Err(Error::Unsupported {
            line: v.line,
            what: "address-valued initialisers".into(),
        });
    }
    let mut out = vec![0u8; extent];
    for (i, x) in v.init.iter().enumerate() {
        let bits: u64 = match (*x, ty) {
            (Init::Int(n), Ty::F32) => (n as f32).to_bits() as u64,
            (Init::Int(n), Ty::F64) => (n as f64).to_bits(),
            (Init::Int(n), _) => n as u64,
            (Init::F32Bits(b), Ty::F64) => (f32::from_bits(b) as f64).to_bits(),
            (Init::F32Bits(b), _) => b as u64,
            (Init::F64Bits(b), Ty::F32) => (f64::from_bits(b) as f32).to_bits() as u64,
            (Init::F64Bits(b), _) => b,
            (Init::Symbol, _) => 0,
        };
        out[i * eb..(i + 1) * eb].copy_from_slice(&bits.to_le_bytes()[..eb]);
    }
    Ok(out)
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a.max(1)) * a.max(1)
}

/// Names of functions called anywhere in `stmts`.
fn callees(stmts: &[Stmt], out: &mut Vec<String>) {
    for s in stmts {
        match s {
            Stmt::Block(b) => callees(b, out),
            Stmt::Inst(i) if i.opcode == "call" => {
                for o in &i.operands {
                    if let ast::Operand::Name(n) = o {
                        out.push(n.to_string());
                        break;
                    }
                }
            }
            _ => {}
        }
    }
}

fn lower_kernel(m: &ast::Module, gmap: &HashMap<String, u32>, k: &ast::Func) -> R<Kernel> {
    // Reachable device functions in call order, rejecting recursion (frames are static).
    // A definition wins over any prototype of the same function.
    let mut fmap: HashMap<&str, &ast::Func> = HashMap::new();
    for f in m.funcs.iter().filter(|f| !f.is_entry) {
        let e = fmap.entry(f.name.as_ref()).or_insert(f);
        if e.body.is_none() {
            *e = f;
        }
    }
    let mut order: Vec<&ast::Func> = Vec::new();
    let mut state: HashMap<String, u8> = HashMap::new();
    fn visit<'a>(
        f: &'a ast::Func<'a>,
        fmap: &HashMap<&str, &'a ast::Func<'a>>,
        state: &mut HashMap<String, u8>,
        order: &mut Vec<&'a ast::Func<'a>>,
        depth: u32,
    ) -> R<()> {
        let mut cs = Vec::new();
        if let Some(b) = &f.body {
            callees(b, &mut cs);
        }
        for c in cs {
            let Some(g) = fmap.get(c.as_str()).copied() else {
                return Err(Error::Invalid {
                    line: f.line,
                    msg: format!("call to undeclared function {c}"),
                });
            };
            match state.get(&c) {
                Some(1) => {
                    return Err(Error::Unsupported {
                        line: g.line,
                        what: format!("recursive call to {c}"),
                    });
                }
                Some(_) => continue,
                None => {}
            }
            if g.body.is_none() && (c == ASSERT_FAIL || c == VPRINTF) {
                continue;
            }
            if g.body.is_none() {
                return Err(Error::Unsupported {
                    line: g.line,
                    what: format!(
                        "call to external function {c} in a module loaded alone; link it \
                         with the module that defines it (cuLink*, ptxvm::link)"
                    ),
                });
            }
            if depth > 256 {
                return Err(Error::Unsupported {
                    line: g.line,
                    what: "call graph deeper than 256".into(),
                });
            }
            state.insert(c.clone(), 1);
            visit(g, fmap, state, order, depth + 1)?;
            state.insert(c, 2);
            order.push(g);
        }
        Ok(())
    }
    visit(k, &fmap, &mut state, &mut order, 0)?;

    let mut cx = Ctx {
        module: m,
        globals: gmap,
        scopes: vec![HashMap::new()],
        code: Vec::new(),
        nregs: 0,
        preloads: Vec::new(),
        preload_map: HashMap::new(),
        sink: 0,
        local_bytes: 0,
        call_params: Vec::new(),
        shared_bytes: 0,
        module_shared: HashMap::new(),
        frames: HashMap::new(),
        label_fixups: Vec::new(),
        labels: HashMap::new(),
        call_fixups: Vec::new(),
        brx_fixups: Vec::new(),
        tables: HashMap::new(),
        line: k.line,
        kparam_bytes: 0,
        cc: None,
    };
    cx.sink = cx.new_reg()?;
    // Frames of callees first, so call sites know where arguments go.
    for f in &order {
        let params = f
            .params
            .iter()
            .map(|p| cx.alloc_local(p))
            .collect::<R<Vec<_>>>()?;
        let rets = f
            .rets
            .iter()
            .map(|p| cx.alloc_local(p))
            .collect::<R<Vec<_>>>()?;
        cx.frames.insert(f.name.to_string(), Frame { params, rets });
    }
    // Kernel parameters.
    let mut params = Vec::new();
    let mut off = 0u64;
    for p in &k.params {
        let (size, align) = var_size(p)?;
        off = align_up(off, u64::from(align));
        params.push(ParamInfo {
            name: p.name.to_string(),
            offset: off as u32,
            size: size as u32,
            align,
        });
        cx.scopes[0].insert(p.name.to_string(), Sym::KParam(off as u32));
        off += size;
        if off > 4 << 20 {
            return Err(Error::TooLarge {
                bytes: off as usize,
            });
        }
    }
    cx.kparam_bytes = off as u32;
    cx.function(k)?;
    let mut entries = HashMap::new();
    for f in &order {
        entries.insert(f.name.to_string(), cx.code.len() as u32);
        cx.scopes.truncate(1);
        cx.scopes[0].clear();
        let fr = cx.frames[f.name.as_ref()].clone();
        for (p, (o, _)) in f.params.iter().zip(&fr.params) {
            cx.scopes[0].insert(p.name.to_string(), Sym::Local(*o));
        }
        for (p, (o, _)) in f.rets.iter().zip(&fr.rets) {
            cx.scopes[0].insert(p.name.to_string(), Sym::Local(*o));
        }
        cx.function(f)?;
    }
    for (at, name) in std::mem::take(&mut cx.call_fixups) {
        if let Op::Control(ControlOp::Call { target, .. }) = &mut cx.code[at].op {
            *target = entries[&name];
        }
    }
    let info = KernelInfo {
        name: k.name.to_string(),
        params,
        static_shared_bytes: cx.shared_bytes as u32,
        local_bytes_per_thread: cx.local_bytes as u32,
        max_threads_per_block: k.max_threads,
        num_regs: cx.nregs,
    };
    Ok(Kernel {
        info,
        code: cx.code,
        nregs: cx.nregs,
        preloads: cx.preloads,
        local_bytes: cx.local_bytes as u32,
    })
}

impl Ctx<'_> {
    fn new_reg(&mut self) -> R<Reg> {
        if self.nregs >= MAX_REGS {
            return Err(Error::TooLarge {
                bytes: self.nregs as usize,
            });
        }
        self.nregs += 1;
        Ok(self.nregs - 1)
    }

    /// Allocates per-thread local storage for a variable; returns (offset, size).
    fn alloc_local(&mut self, v: &VarDecl) -> R<(u32, u32)> {
        let (size, align) = var_size(v)?;
        let off = align_up(self.local_bytes, u64::from(align));
        self.local_bytes = off + size;
        if self.local_bytes > MAX_STORAGE {
            return Err(Error::TooLarge {
                bytes: self.local_bytes as usize,
            });
        }
        Ok((off as u32, size as u32))
    }

    fn alloc_shared(&mut self, v: &VarDecl) -> R<Sym> {
        if v.is_extern || v.count == Some(0) {
            return Ok(Sym::DynShared);
        }
        let (size, align) = var_size(v)?;
        let off = align_up(self.shared_bytes, u64::from(align));
        self.shared_bytes = off + size;
        if self.shared_bytes > MAX_STORAGE {
            return Err(Error::TooLarge {
                bytes: self.shared_bytes as usize,
            });
        }
        Ok(Sym::Shared(off as u32))
    }

    /// Hidden register holding a per-lane constant.
    fn preload(&mut self, p: Preload) -> R<Reg> {
        if let Some(r) = self.preload_map.get(&p) {
            return Ok(*r);
        }
        let r = self.new_reg()?;
        self.preloads.push((r, p));
        self.preload_map.insert(p, r);
        Ok(r)
    }

    /// Looks a name up through the scopes, then module shared variables and globals.
    fn lookup(&mut self, name: &str) -> R<Option<Sym>> {
        for s in self.scopes.iter().rev() {
            if let Some(x) = s.get(name) {
                return Ok(Some(*x));
            }
        }
        if let Some(&i) = self.globals.get(name) {
            return Ok(Some(Sym::Global(i)));
        }
        if let Some(&o) = self.module_shared.get(name) {
            return Ok(Some(Sym::Shared(o)));
        }
        let module = self.module;
        if let Some(v) = module
            .vars
            .iter()
            .find(|v| v.space == ASpace::Shared && v.name == name)
        {
            let s = self.alloc_shared(v)?;
            if let Sym::Shared(o) = s {
                self.module_shared.insert(name.to_string(), o);
            }
            return Ok(Some(s));
        }
        Ok(None)
    }

    fn push(&mut self, op: impl Into<Op>) {
        self.code.push(Inst {
            op: op.into(),
            guard: crate::ir::NO_REG,
            guard_neg: false,
            line: self.line,
        });
    }

    fn function(&mut self, f: &ast::Func) -> R<()> {
        self.labels.clear();
        self.label_fixups.clear();
        self.brx_fixups.clear();
        self.tables.clear();
        self.line = f.line;
        if let Some(b) = &f.body {
            self.block(b, 0)?;
        }
        // Falling off the end of a function returns.
        self.push(Op::Control(if f.is_entry {
            ControlOp::Exit
        } else {
            ControlOp::Ret
        }));
        for (at, name, line) in std::mem::take(&mut self.label_fixups) {
            let Some(&pc) = self.labels.get(&name) else {
                return Err(Error::Invalid {
                    line,
                    msg: format!("branch to undefined label {name}"),
                });
            };
            if let Op::Control(ControlOp::Bra { target }) = &mut self.code[at].op {
                *target = pc;
            }
        }
        for (at, table, line) in std::mem::take(&mut self.brx_fixups) {
            let Some(labels) = self.tables.get(&table) else {
                return Err(Error::Invalid {
                    line,
                    msg: format!("brx.idx to undefined branch table {table}"),
                });
            };
            let mut pcs = Vec::with_capacity(labels.len());
            for l in labels {
                let Some(&pc) = self.labels.get(l) else {
                    return Err(Error::Invalid {
                        line,
                        msg: format!("branch table {table} names undefined label {l}"),
                    });
                };
                pcs.push(pc);
            }
            if let Op::Control(ControlOp::Brx { targets, .. }) = &mut self.code[at].op {
                *targets = pcs.into_boxed_slice();
            }
        }
        Ok(())
    }

    fn block(&mut self, stmts: &[Stmt], depth: u32) -> R<()> {
        if depth > 0 {
            self.scopes.push(HashMap::new());
        }
        for s in stmts {
            match s {
                Stmt::Reg { ty, names, line } => {
                    self.line = *line;
                    let Some(t) = Ty::parse(ty) else {
                        return Err(Error::Unsupported {
                            line: *line,
                            what: format!("register type .{ty}"),
                        });
                    };
                    for (n, range) in names {
                        match range {
                            None => {
                                let r = self.new_reg()?;
                                self.scope().insert(n.to_string(), Sym::Reg(r, t));
                            }
                            Some(c) => {
                                if *c > MAX_REGS {
                                    return Err(Error::TooLarge { bytes: *c as usize });
                                }
                                for i in 0..*c {
                                    let r = self.new_reg()?;
                                    self.scope().insert(format!("{n}{i}"), Sym::Reg(r, t));
                                }
                            }
                        }
                    }
                }
                Stmt::Var(v) => {
                    self.line = v.line;
                    let sym = match v.space {
                        ASpace::Local => Sym::Local(self.alloc_local(v)?.0),
                        ASpace::Param => {
                            let (off, size) = self.alloc_local(v)?;
                            self.call_params.push((off, size));
                            Sym::Local(off)
                        }
                        ASpace::Shared => self.alloc_shared(v)?,
                        _ => {
                            return Err(Error::Unsupported {
                                line: v.line,
                                what: "function-scope .global/.const variables".into(),
                            });
                        }
                    };
                    self.scope().insert(v.name.to_string(), sym);
                }
                Stmt::Targets(name, labels, line) => {
                    let labels = labels.iter().map(|l| l.to_string()).collect();
                    if self.tables.insert(name.to_string(), labels).is_some() {
                        return Err(Error::Invalid {
                            line: *line,
                            msg: format!("branch table {name} defined twice"),
                        });
                    }
                }
                Stmt::Label(l, line) => {
                    if self
                        .labels
                        .insert(l.to_string(), self.code.len() as u32)
                        .is_some()
                    {
                        return Err(Error::Invalid {
                            line: *line,
                            msg: format!("label {l} defined twice"),
                        });
                    }
                }
                Stmt::Inst(i) => {
                    self.line = i.line;
                    self.inst(i)?;
                }
                Stmt::Block(b) => self.block(b, depth + 1)?,
            }
        }
        if depth > 0 {
            self.scopes.pop();
        }
        Ok(())
    }

    fn scope(&mut self) -> &mut HashMap<String, Sym> {
        let top = self.scopes.len() - 1;
        &mut self.scopes[top]
    }
}
