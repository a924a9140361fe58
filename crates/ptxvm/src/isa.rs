//! The PTX instruction set, declared once: one row per opcode of the PTX ISA (8.x) with its
//! name, the family that lowers and executes it, the modifiers it accepts, what the sandbox does
//! with it, and whether its first operand is a destination. The lowering (`lower::inst`), the
//! executor (`vm::exec`, by family), the sandbox's allow-list and rewriter, and the printer all
//! read this table instead of keeping their own opcode lists.
//!
//! Adding an instruction (docs/ARCHITECTURE.md says the same):
//! 1. give its row a family other than `Unimplemented` and the right `Modifiers` set;
//! 2. decode it in that family's lowering (`lower/inst.rs` for `Arith`, `lower/memory.rs`,
//!    `lower/control.rs`), into an `ir` op of the same family;
//! 3. execute that op in the family's executor (`vm/exec/`);
//! 4. give it a sample in `isa/tests.rs`, which proves every implemented row lowers into its
//!    family, runs, and is classified by the sandbox the way its row says.

use crate::ir::Cmp;

/// Which part of the lowering and of the executor handles an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Register arithmetic, logic, comparison, conversion and moves.
    Arith,
    /// Loads, stores, atomics, async copies and prefetch hints.
    Memory,
    /// Branches, calls, returns, exits, traps, barriers and memory-ordering no-ops.
    Control,
    /// Warp collectives: shuffles, votes, matches, reductions across lanes.
    Collective,
    /// Texture and surface objects: sampled reads, surface loads and stores, size queries.
    Texture,
    /// Valid PTX that ptxvm does not run: loading it is `Error::Unsupported`.
    Unimplemented,
}

/// What the sandbox's rewriter does with an instruction. Only what it can prove stays inside
/// the guest's arena is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sandbox {
    /// Copied as written: it reads and writes registers or moves the PC within the module, and
    /// cannot reach memory.
    Plain,
    /// Copied, but may name a variable as a bare `var+offset` address, which the rewriter
    /// relocates (`mov`, `cvta`).
    Address,
    /// A memory access: the rewriter fences its address into the guest's arena.
    Fence,
    /// A hint that reads nothing: the rewriter drops it (nothing left to fence).
    Hint,
    /// Refused, for the reason given.
    Refuse(Refusal),
}

/// Why the sandbox refuses an instruction; `message` is what the guest's author reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `trap`/`brkpt`: stops the whole context, every tenant's work with it.
    StopsContext,
    /// `pmevent`: signals the performance monitor, outside the guest.
    Monitor,
    /// Textures and surfaces: their handles reach memory the fence cannot see.
    Texture,
    /// Anything else the rewriter does not understand (and so cannot prove safe).
    NotAllowed,
}

impl Refusal {
    /// The refusal message for opcode `op`.
    pub(crate) fn message(self, op: &str) -> String {
        match self {
            Refusal::StopsContext => format!(
                "{op} would stop the whole GPU context; report errors through an output buffer"
            ),
            Refusal::Monitor => "pmevent (performance monitor events); remove it".to_string(),
            Refusal::Texture => format!(
                "{op}: texture and surface instructions; read and write buffers with ld/st.global"
            ),
            Refusal::NotAllowed => format!(
                "instruction {op} is not on the sandbox's allow-list; use plain ld/st/atom and \
                 arithmetic"
            ),
        }
    }
}

/// The modifier set an opcode accepts (types are the lowering's to check, per form). Anything
/// outside it is reported as unsupported rather than silently ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modifiers {
    /// Rounding, flush-to-zero and saturation only (the default).
    Rounding,
    Cvt,
    Carry,
    Madc,
    MinMax,
    Shf,
    /// `bmsk`, `szext`: how a bit count of 32 or more is read.
    Mode,
    Brx,
    Bfind,
    Redux,
    Isspacep,
    /// `cvta`, `ld`, `ldu`, `st`: state spaces and vector widths.
    Access,
    /// `atom`, `red`: spaces and operations.
    Atomic,
    /// `setp`, `set`: comparisons and the predicate combiners.
    Compare,
    Mul,
    Mul24,
    Mad,
    AddSub,
    Barrier,
    Shfl,
    Vote,
    Match,
    /// `wmma`: its operation, fragment, layouts, shapes and state spaces.
    Wmma,
    /// `mbarrier`: its operation, its memory semantics and scope, and the state space.
    Mbarrier,
    /// `mma`, `movmatrix`, `ldmatrix`, `stmatrix`: shapes, layouts, the non-`Ty` element
    /// type `tf32`, saturation, matrix counts, the shared state space.
    Mma,
    Testp,
    Fence,
    Cp,
    Prefetch,
    /// `tex`, `tld4`, `suld`, `sust`, `txq`, `suq`: geometries, vector widths, gather
    /// components, out-of-bounds modes and queries.
    Texture,
}

/// Modifiers that change nothing in a single-address-space, sequentially consistent interpreter.
const IGNORED: &[&str] = &[
    "uni", "nc", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "weak", "sys",
    "gpu", "cta", "cluster", "aligned", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "sync", "approx",
    "full", "noftz", "ptr", "to", "gl",
];

impl Modifiers {
    /// Whether modifier `f` (a flag, not a type) is one this set accepts.
    pub(crate) fn accepts(self, f: &str) -> bool {
        if IGNORED.contains(&f) || f.starts_with("L1::") || f.starts_with("L2::") {
            return true;
        }
        let rnd = matches!(f, "rn" | "rz" | "rm" | "rp" | "ftz" | "sat");
        match self {
            Modifiers::Rounding => rnd,
            Modifiers::Cvt => rnd || matches!(f, "rni" | "rzi" | "rmi" | "rpi"),
            Modifiers::Carry => f == "cc",
            Modifiers::Madc => matches!(f, "cc" | "lo" | "hi"),
            Modifiers::MinMax => rnd || f == "NaN",
            Modifiers::Shf => matches!(f, "l" | "r" | "wrap" | "clamp"),
            Modifiers::Mode => matches!(f, "wrap" | "clamp"),
            Modifiers::Brx => matches!(f, "idx" | "uni"),
            Modifiers::Bfind => f == "shiftamt",
            Modifiers::Redux => matches!(f, "add" | "min" | "max" | "and" | "or" | "xor"),
            Modifiers::Isspacep => {
                matches!(f, "global" | "shared" | "local" | "const" | "shared::cta")
            }
            Modifiers::Access => matches!(
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
            Modifiers::Atomic => matches!(
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
            Modifiers::Compare => {
                f == "ftz" || matches!(f, "and" | "or" | "xor") || Cmp::parse(f).is_some()
            }
            Modifiers::Mul => rnd || matches!(f, "lo" | "hi" | "wide"),
            Modifiers::Mul24 => matches!(f, "lo" | "hi"),
            Modifiers::Mad => rnd || matches!(f, "lo" | "hi" | "wide" | "cc"),
            Modifiers::AddSub => rnd || f == "cc",
            Modifiers::Barrier => matches!(f, "warp" | "arrive" | "red" | "cta" | "all"),
            Modifiers::Shfl => matches!(f, "up" | "down" | "bfly" | "idx"),
            Modifiers::Vote => matches!(f, "all" | "any" | "uni" | "ballot"),
            Modifiers::Match => matches!(f, "any" | "all"),
            Modifiers::Wmma => {
                crate::ir::matrix::WmmaShape::parse(f).is_some()
                    || matches!(
                        f,
                        "load" | "store" | "mma" | "a" | "b" | "c" | "d" | "row" | "col"
                    )
                    || matches!(f, "tf32" | "rn")
                    || matches!(f, "global" | "shared" | "shared::cta" | "satfinite")
            }
            Modifiers::Mbarrier => {
                matches!(
                    f,
                    "init" | "inval" | "arrive" | "arrive_drop" | "noComplete" | "test_wait"
                ) || matches!(
                    f,
                    "try_wait"
                        | "parity"
                        | "shared"
                        | "shared::cta"
                        | "release"
                        | "acquire"
                        | "cta"
                )
            }
            Modifiers::Mma => {
                crate::ir::matrix::Shape::parse(f).is_some()
                    || matches!(f, "row" | "col" | "tf32" | "satfinite" | "m8n8" | "trans")
                    || matches!(f, "x1" | "x2" | "x4" | "shared" | "shared::cta")
            }
            Modifiers::Testp => matches!(
                f,
                "finite" | "infinite" | "number" | "notanumber" | "normal" | "subnormal"
            ),
            Modifiers::Fence => matches!(f, "proxy" | "alias" | "acqrel"),
            Modifiers::Cp => matches!(
                f,
                "async"
                    | "shared"
                    | "shared::cta"
                    | "global"
                    | "commit_group"
                    | "wait_group"
                    | "wait_all"
                    | "mbarrier"
                    | "arrive"
                    | "noinc"
            ),
            Modifiers::Texture => matches!(
                f,
                "1d" | "2d"
                    | "3d"
                    | "a1d"
                    | "a2d"
                    | "v2"
                    | "v4"
                    | "b"
                    | "trap"
                    | "clamp"
                    | "zero"
                    | "width"
                    | "height"
                    | "depth"
                    | "r"
                    | "g"
                    | "a"
            ),
            // A hint that reads nothing: every documented level and space is accepted.
            Modifiers::Prefetch => matches!(
                f,
                "global" | "local" | "L1" | "L2" | "tensormap" | "global::evict_last"
            ),
        }
    }
}

/// Slots of `Opcode::parse`'s table: some 30 per opcode, so that nearly every name hashes to
/// a slot of its own and a lookup compares one name.
const NAME_SLOTS: usize = 4096;

/// What `Opcode::parse` hashes and compares first: a name's length and its first, middle and
/// last bytes, which sets the opcodes apart nearly as well as every byte did, at a fixed cost
/// per name. For a name of three bytes or fewer these are all of its bytes: equal keys are
/// then equal names.
const fn name_key(b: &[u8]) -> u64 {
    let n = b.len();
    if n == 0 {
        return 0;
    }
    b[0] as u64 | (b[n / 2] as u64) << 8 | (b[n - 1] as u64) << 16 | (n as u64) << 24
}

/// Where `Opcode::parse` looks for the name of key `key` first: a multiplicative hash.
const fn name_hash(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % NAME_SLOTS
}

/// Each name's [`name_key`], by index.
const fn name_keys<const N: usize>(names: &[&str]) -> [u64; N] {
    let mut t = [0u64; N];
    let mut i = 0;
    while i < N {
        t[i] = name_key(names[i].as_bytes());
        i += 1;
    }
    t
}

/// Whether two names are the same, byte by byte: opcode names are a few bytes, shorter than
/// the call to `memcmp` that `==` makes.
fn same_name(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// `Opcode::parse`'s table, by linear probing: slot `s` holds 1 + the index of the opcode
/// that hashed there, 0 when empty.
const fn name_slots(names: &[&str]) -> [u8; NAME_SLOTS] {
    assert!(
        names.len() < 255,
        "opcode indices must fit the table's bytes"
    );
    let mut t = [0u8; NAME_SLOTS];
    let mut i = 0;
    while i < names.len() {
        let mut h = name_hash(name_key(names[i].as_bytes()));
        while t[h] != 0 {
            h = (h + 1) % NAME_SLOTS;
        }
        t[h] = (i + 1) as u8;
        i += 1;
    }
    t
}

/// Declares `Opcode` and its per-row accessors from the table below.
macro_rules! isa {
    ($($op:ident $name:literal $family:ident $mods:ident $sandbox:expr, $dest:literal;)*) => {
        /// An opcode of the PTX ISA.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum Opcode {
            $($op,)*
        }

        impl Opcode {
            /// Every opcode, in table order.
            pub(crate) const ALL: &[Opcode] = &[$(Opcode::$op,)*];

            /// The opcode named `name` (the word before the first `.`); `None`: not PTX.
            // A hash table built at compile time: the `match` on the name compared it with the
            // names one length group at a time, some 70 instructions for every instruction
            // parsed.
            pub(crate) fn parse(name: &str) -> Option<Opcode> {
                const NAMES: &[&str] = &[$($name,)*];
                const SLOTS: [u8; NAME_SLOTS] = name_slots(NAMES);
                const KEYS: [u64; NAMES.len()] = name_keys(NAMES);
                let key = name_key(name.as_bytes());
                let mut h = name_hash(key);
                loop {
                    let k = usize::from(SLOTS[h]).checked_sub(1)?;
                    // The key first: equal, it settles a short name (most opcodes) without
                    // comparing bytes one by one.
                    if KEYS.get(k) == Some(&key)
                        && (name.len() <= 3 || same_name(NAMES.get(k)?.as_bytes(), name.as_bytes()))
                    {
                        return Opcode::ALL.get(k).copied();
                    }
                    h = (h + 1) % NAME_SLOTS;
                }
            }

            /// The PTX spelling.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Opcode::$op => $name,)*
                }
            }

            /// The family that lowers and executes it.
            pub(crate) fn family(self) -> Family {
                match self {
                    $(Opcode::$op => Family::$family,)*
                }
            }

            /// The modifiers it accepts.
            pub(crate) fn modifiers(self) -> Modifiers {
                match self {
                    $(Opcode::$op => Modifiers::$mods,)*
                }
            }

            /// What the sandbox does with it.
            pub(crate) fn sandbox(self) -> Sandbox {
                #[allow(unused_imports)]
                use {Refusal::*, Sandbox::*};
                match self {
                    $(Opcode::$op => $sandbox,)*
                }
            }

            /// Whether its first operand (or a `|` pair anywhere) is written.
            pub(crate) fn writes_first_operand(self) -> bool {
                match self {
                    $(Opcode::$op => $dest,)*
                }
            }
        }
    };
}

isa! {
    // Opcode      PTX             family        modifiers  sandbox                   dest
    Abs            "abs"           Arith         Rounding   Plain,                    true;
    Activemask     "activemask"    Collective    Rounding   Plain,                    true;
    Add            "add"           Arith         AddSub     Plain,                    true;
    Addc           "addc"          Arith         Carry      Plain,                    true;
    Alloca         "alloca"        Unimplemented Rounding   Refuse(NotAllowed),       true;
    And            "and"           Arith         Rounding   Plain,                    true;
    Applypriority  "applypriority" Unimplemented Rounding   Refuse(NotAllowed),       true;
    Atom           "atom"          Memory        Atomic     Fence,                    true;
    Bar            "bar"           Control       Barrier    Plain,                    false;
    Barrier        "barrier"       Control       Barrier    Plain,                    false;
    Bfe            "bfe"           Arith         Rounding   Plain,                    true;
    Bfi            "bfi"           Arith         Rounding   Plain,                    true;
    Bfind          "bfind"         Arith         Bfind      Plain,                    true;
    Bmsk           "bmsk"          Arith         Mode       Plain,                    true;
    Bra            "bra"           Control       Rounding   Plain,                    false;
    Brev           "brev"          Arith         Rounding   Plain,                    true;
    Brkpt          "brkpt"         Control       Rounding   Refuse(StopsContext),     true;
    Brx            "brx"           Control       Brx        Plain,                    false;
    Call           "call"          Control       Rounding   Plain,                    false;
    Clusterlaunchcontrol "clusterlaunchcontrol" Unimplemented Rounding Refuse(NotAllowed), true;
    Clz            "clz"           Arith         Rounding   Plain,                    true;
    Cnot           "cnot"          Arith         Rounding   Plain,                    true;
    Copysign       "copysign"      Arith         Rounding   Plain,                    true;
    Cos            "cos"           Arith         Rounding   Plain,                    true;
    Cp             "cp"            Memory        Cp         Fence,                    true;
    Createpolicy   "createpolicy"  Unimplemented Rounding   Refuse(NotAllowed),       true;
    Cvt            "cvt"           Arith         Cvt        Plain,                    true;
    Cvta           "cvta"          Arith         Access     Address,                  true;
    Discard        "discard"       Unimplemented Rounding   Refuse(NotAllowed),       true;
    Div            "div"           Arith         Rounding   Plain,                    true;
    Dp2a           "dp2a"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Dp4a           "dp4a"          Arith         Rounding   Plain,                    true;
    Elect          "elect"         Collective    Rounding   Plain,                    true;
    Ex2            "ex2"           Arith         Rounding   Plain,                    true;
    Exit           "exit"          Control       Rounding   Plain,                    false;
    Fence          "fence"         Control       Fence      Plain,                    false;
    Fma            "fma"           Arith         Rounding   Plain,                    true;
    Fns            "fns"           Arith         Rounding   Plain,                    true;
    Getctarank     "getctarank"    Unimplemented Rounding   Refuse(NotAllowed),       true;
    Griddepcontrol "griddepcontrol" Unimplemented Rounding  Refuse(NotAllowed),       true;
    Isspacep       "isspacep"      Arith         Isspacep   Plain,                    true;
    Istypep        "istypep"       Unimplemented Rounding   Refuse(Texture),          true;
    Ld             "ld"            Memory        Access     Fence,                    true;
    Ldmatrix       "ldmatrix"      Memory        Mma        Fence,                    true;
    Ldu            "ldu"           Memory        Access     Fence,                    true;
    Lg2            "lg2"           Arith         Rounding   Plain,                    true;
    Lop3           "lop3"          Arith         Rounding   Plain,                    true;
    Mad            "mad"           Arith         Mad        Plain,                    true;
    Mad24          "mad24"         Arith         Mul24      Plain,                    true;
    Madc           "madc"          Arith         Madc       Plain,                    true;
    Mapa           "mapa"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Match          "match"         Collective    Match      Plain,                    true;
    Max            "max"           Arith         MinMax     Plain,                    true;
    Mbarrier       "mbarrier"      Memory        Mbarrier   Fence,                    true;
    Membar         "membar"        Control       Fence      Plain,                    false;
    Min            "min"           Arith         MinMax     Plain,                    true;
    Mma            "mma"           Collective    Mma        Plain,                    true;
    Mov            "mov"           Arith         Rounding   Address,                  true;
    Movmatrix      "movmatrix"     Collective    Mma        Plain,                    true;
    Mul            "mul"           Arith         Mul        Plain,                    true;
    Mul24          "mul24"         Arith         Mul24      Plain,                    true;
    Multimem       "multimem"      Unimplemented Rounding   Refuse(NotAllowed),       true;
    Nanosleep      "nanosleep"     Control       Rounding   Plain,                    false;
    Neg            "neg"           Arith         Rounding   Plain,                    true;
    Not            "not"           Arith         Rounding   Plain,                    true;
    Or             "or"            Arith         Rounding   Plain,                    true;
    Pmevent        "pmevent"       Control       Rounding   Refuse(Monitor),          true;
    Popc           "popc"          Arith         Rounding   Plain,                    true;
    Prefetch       "prefetch"      Memory        Prefetch   Hint,                     false;
    Prefetchu      "prefetchu"     Memory        Prefetch   Hint,                     false;
    Prmt           "prmt"          Arith         Rounding   Plain,                    true;
    Rcp            "rcp"           Arith         Rounding   Plain,                    true;
    Red            "red"           Memory        Atomic     Fence,                    false;
    Redux          "redux"         Collective    Redux      Plain,                    true;
    Rem            "rem"           Arith         Rounding   Plain,                    true;
    Ret            "ret"           Control       Rounding   Plain,                    false;
    Rsqrt          "rsqrt"         Arith         Rounding   Plain,                    true;
    Sad            "sad"           Arith         Rounding   Plain,                    true;
    Selp           "selp"          Arith         Rounding   Plain,                    true;
    Set            "set"           Arith         Compare    Plain,                    true;
    Setmaxnreg     "setmaxnreg"    Unimplemented Rounding   Refuse(NotAllowed),       true;
    Setp           "setp"          Arith         Compare    Plain,                    true;
    Shf            "shf"           Arith         Shf        Plain,                    true;
    Shfl           "shfl"          Collective    Shfl       Plain,                    true;
    Shl            "shl"           Arith         Rounding   Plain,                    true;
    Shr            "shr"           Arith         Rounding   Plain,                    true;
    Sin            "sin"           Arith         Rounding   Plain,                    true;
    Slct           "slct"          Arith         Rounding   Plain,                    true;
    Sqrt           "sqrt"          Arith         Rounding   Plain,                    true;
    St             "st"            Memory        Access     Fence,                    false;
    Stackrestore   "stackrestore"  Unimplemented Rounding   Refuse(NotAllowed),       true;
    Stacksave      "stacksave"     Unimplemented Rounding   Refuse(NotAllowed),       true;
    Stmatrix       "stmatrix"      Memory        Mma        Fence,                    false;
    Sub            "sub"           Arith         AddSub     Plain,                    true;
    Subc           "subc"          Arith         Carry      Plain,                    true;
    Suld           "suld"          Texture       Texture    Refuse(Texture),          true;
    Suq            "suq"           Texture       Texture    Refuse(Texture),          true;
    Sured          "sured"         Unimplemented Rounding   Refuse(Texture),          true;
    Sust           "sust"          Texture       Texture    Refuse(Texture),          false;
    Szext          "szext"         Arith         Mode       Plain,                    true;
    Tanh           "tanh"          Arith         Rounding   Plain,                    true;
    Tcgen05        "tcgen05"       Unimplemented Rounding   Refuse(NotAllowed),       true;
    Tensormap      "tensormap"     Unimplemented Rounding   Refuse(NotAllowed),       true;
    Testp          "testp"         Arith         Testp      Plain,                    true;
    Tex            "tex"           Texture       Texture    Refuse(Texture),          true;
    Tld4           "tld4"          Texture       Texture    Refuse(Texture),          true;
    Trap           "trap"          Control       Rounding   Refuse(StopsContext),     true;
    Txq            "txq"           Texture       Texture    Refuse(Texture),          true;
    Vabsdiff       "vabsdiff"      Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vabsdiff2      "vabsdiff2"     Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vabsdiff4      "vabsdiff4"     Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vadd           "vadd"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vadd2          "vadd2"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vadd4          "vadd4"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vavrg2         "vavrg2"        Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vavrg4         "vavrg4"        Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmad           "vmad"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmax           "vmax"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmax2          "vmax2"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmax4          "vmax4"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmin           "vmin"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmin2          "vmin2"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vmin4          "vmin4"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vote           "vote"          Collective    Vote       Plain,                    true;
    Vset           "vset"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vset2          "vset2"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vset4          "vset4"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vshl           "vshl"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vshr           "vshr"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vsub           "vsub"          Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vsub2          "vsub2"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Vsub4          "vsub4"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Wgmma          "wgmma"         Unimplemented Rounding   Refuse(NotAllowed),       true;
    Wmma           "wmma"          Memory        Wmma       Fence,                    true;
    Xor            "xor"           Arith         Rounding   Plain,                    true;
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
