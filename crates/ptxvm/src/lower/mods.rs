//! Instruction modifiers: splitting them into types and flags, and which flags each opcode
//! accepts (anything else is reported as unsupported rather than silently ignored).

use crate::ir::{Cmp, Rnd, Space, Ty};

/// Modifiers that change nothing in a single-address-space, sequentially consistent interpreter.
const IGNORED: &[&str] = &[
    "uni", "nc", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "weak", "sys",
    "gpu", "cta", "cluster", "aligned", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "sync", "approx",
    "full", "noftz", "ptr", "to", "gl",
];

/// The double-width type of `mul.wide`/`mad.wide`.
pub(crate) fn wide(t: Ty) -> Ty {
    match t {
        Ty::S16 => Ty::S32,
        Ty::U16 => Ty::U32,
        Ty::S32 => Ty::S64,
        _ => Ty::U64,
    }
}

/// Whether `flag` is a modifier this decoder understands for `op` (types are handled apart).
pub(super) fn known_flag(op: &str, f: &str) -> bool {
    if IGNORED.contains(&f) || f.starts_with("L1::") || f.starts_with("L2::") {
        return true;
    }
    let rnd = matches!(f, "rn" | "rz" | "rm" | "rp" | "ftz" | "sat");
    match op {
        "cvt" => rnd || matches!(f, "rni" | "rzi" | "rmi" | "rpi"),
        "addc" | "subc" => f == "cc",
        "madc" => matches!(f, "cc" | "lo" | "hi"),
        "min" | "max" => rnd || f == "NaN",
        "shf" => matches!(f, "l" | "r" | "wrap" | "clamp"),
        "brx" => matches!(f, "idx" | "uni"),
        "bfind" => f == "shiftamt",
        "redux" => matches!(f, "add" | "min" | "max" | "and" | "or" | "xor"),
        "isspacep" => matches!(f, "global" | "shared" | "local" | "const" | "shared::cta"),
        "cvta" | "ld" | "ldu" | "st" => matches!(
            f,
            "global"
                | "shared"
                | "shared::cta"
                | "local"
                | "const"
                | "param"
                | "param::entry"
                | "param::func"
                | "v2"
                | "v4"
        ),
        "atom" | "red" => matches!(
            f,
            "global"
                | "shared"
                | "shared::cta"
                | "add"
                | "min"
                | "max"
                | "inc"
                | "dec"
                | "and"
                | "or"
                | "xor"
                | "exch"
                | "cas"
        ),
        "setp" | "set" => {
            f == "ftz" || matches!(f, "and" | "or" | "xor") || Mods::cmp_of(f).is_some()
        }
        "mul" => rnd || matches!(f, "lo" | "hi" | "wide"),
        "mul24" | "mad24" => matches!(f, "lo" | "hi"),
        "mad" => rnd || matches!(f, "lo" | "hi" | "wide" | "cc"),
        "add" | "sub" => rnd || f == "cc",
        "bar" | "barrier" => matches!(f, "warp" | "arrive" | "red" | "cta" | "all"),
        "shfl" => matches!(f, "up" | "down" | "bfly" | "idx"),
        "vote" => matches!(f, "all" | "any" | "uni" | "ballot"),
        "match" => matches!(f, "any" | "all"),
        "testp" => matches!(
            f,
            "finite" | "infinite" | "number" | "notanumber" | "normal" | "subnormal"
        ),
        "membar" | "fence" => matches!(f, "proxy" | "alias" | "acqrel"),
        "cp" => matches!(
            f,
            "async"
                | "shared"
                | "shared::cta"
                | "global"
                | "commit_group"
                | "wait_group"
                | "wait_all"
        ),
        // A hint that reads nothing: every documented level and space is accepted.
        "prefetch" | "prefetchu" => matches!(
            f,
            "global" | "local" | "L1" | "L2" | "tensormap" | "global::evict_last"
        ),
        _ => rnd,
    }
}

/// An instruction's modifiers split into types and flags.
pub(super) struct Mods<'a> {
    tys: Vec<Ty>,
    pub(super) flags: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    pub(super) fn new(mods: &'a [String]) -> Self {
        let mut tys = Vec::new();
        let mut flags = Vec::new();
        for m in mods {
            match Ty::parse(m) {
                Some(t) => tys.push(t),
                None => flags.push(m.as_str()),
            }
        }
        Mods { tys, flags }
    }
    pub(super) fn has(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }
    pub(super) fn last_ty(&self) -> Option<Ty> {
        self.tys.last().copied()
    }
    pub(super) fn two_tys(&self) -> Option<(Ty, Ty)> {
        match self.tys.as_slice() {
            [a, b] => Some((*a, *b)),
            _ => None,
        }
    }
    pub(super) fn vec(&self) -> u8 {
        if self.has("v4") {
            4
        } else if self.has("v2") {
            2
        } else {
            1
        }
    }
    pub(super) fn space(&self) -> Option<Space> {
        self.flags.iter().find_map(|f| match *f {
            "global" | "const" => Some(Space::Global),
            "shared" | "shared::cta" => Some(Space::Shared),
            "local" => Some(Space::Local),
            "param" | "param::entry" | "param::func" => Some(Space::Param),
            _ => None,
        })
    }
    pub(super) fn rnd(&self) -> Option<Rnd> {
        self.flags.iter().find_map(|f| match *f {
            "rn" | "rni" => Some(Rnd::Rn),
            "rz" | "rzi" => Some(Rnd::Rz),
            "rm" | "rmi" => Some(Rnd::Rm),
            "rp" | "rpi" => Some(Rnd::Rp),
            _ => None,
        })
    }
    pub(super) fn cmp_of(f: &str) -> Option<Cmp> {
        Some(match f {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" => Cmp::Lt,
            "le" => Cmp::Le,
            "gt" => Cmp::Gt,
            "ge" => Cmp::Ge,
            "lo" => Cmp::Lo,
            "ls" => Cmp::Ls,
            "hi" => Cmp::Hi,
            "hs" => Cmp::Hs,
            "equ" => Cmp::Equ,
            "neu" => Cmp::Neu,
            "ltu" => Cmp::Ltu,
            "leu" => Cmp::Leu,
            "gtu" => Cmp::Gtu,
            "geu" => Cmp::Geu,
            "num" => Cmp::Num,
            "nan" => Cmp::Nan,
            _ => return None,
        })
    }
    pub(super) fn cmp(&self) -> Option<Cmp> {
        self.flags.iter().find_map(|f| Self::cmp_of(f))
    }
}

/// Every opcode of the PTX ISA (8.x); an opcode outside this list is invalid PTX, one inside it
/// that ptxvm does not implement is unsupported.
pub(super) const PTX_OPCODES: &[&str] = &[
    "abs",
    "activemask",
    "add",
    "addc",
    "alloca",
    "and",
    "applypriority",
    "atom",
    "bar",
    "barrier",
    "bfe",
    "bfi",
    "bfind",
    "bmsk",
    "bra",
    "brev",
    "brkpt",
    "brx",
    "call",
    "clusterlaunchcontrol",
    "clz",
    "cnot",
    "copysign",
    "cos",
    "cp",
    "createpolicy",
    "cvt",
    "cvta",
    "discard",
    "div",
    "dp2a",
    "dp4a",
    "elect",
    "ex2",
    "exit",
    "fence",
    "fma",
    "fns",
    "getctarank",
    "griddepcontrol",
    "isspacep",
    "istypep",
    "ld",
    "ldmatrix",
    "ldu",
    "lg2",
    "lop3",
    "mad",
    "mad24",
    "madc",
    "mapa",
    "match",
    "max",
    "mbarrier",
    "membar",
    "min",
    "mma",
    "mov",
    "movmatrix",
    "mul",
    "mul24",
    "multimem",
    "nanosleep",
    "neg",
    "not",
    "or",
    "pmevent",
    "popc",
    "prefetch",
    "prefetchu",
    "prmt",
    "rcp",
    "red",
    "redux",
    "rem",
    "ret",
    "rsqrt",
    "sad",
    "selp",
    "set",
    "setmaxnreg",
    "setp",
    "shf",
    "shfl",
    "shl",
    "shr",
    "sin",
    "slct",
    "sqrt",
    "st",
    "stackrestore",
    "stacksave",
    "stmatrix",
    "sub",
    "subc",
    "suld",
    "suq",
    "sured",
    "sust",
    "szext",
    "tanh",
    "tcgen05",
    "tensormap",
    "testp",
    "tex",
    "tld4",
    "trap",
    "txq",
    "vabsdiff",
    "vabsdiff2",
    "vabsdiff4",
    "vadd",
    "vadd2",
    "vadd4",
    "vavrg2",
    "vavrg4",
    "vmad",
    "vmax",
    "vmax2",
    "vmax4",
    "vmin",
    "vmin2",
    "vmin4",
    "vote",
    "vset",
    "vset2",
    "vset4",
    "vshl",
    "vshr",
    "vsub",
    "vsub2",
    "vsub4",
    "wgmma",
    "wmma",
    "xor",
];
