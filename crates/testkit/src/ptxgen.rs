//! Random PTX programs for testing the PTX sandbox, in the manner of Csmith: loops bounded by
//! constants and by run-time values (in the shapes loop versioning copies, and others), short
//! guarded blocks, predicated instructions, device functions, barriers, and global, generic,
//! shared and local accesses, vector, `.nc`, byte, half, double-word and atomic forms among
//! them. ptxvm's tests run them on ptxvm; conformance's on the driver under test (softcuda in
//! CI, NVIDIA's on the H200).
//!
//! Every program has one kernel, `gen(.param .u64 out, .param .u64 inp, .param .u64 wild,
//! .param .u32 s)`, launched as [`BLOCKS`] blocks of [`THREADS`] threads:
//! - `out` ([`out_bytes`]): each thread's slot of [`SLOT`] words (the first [`SCRATCH`] its
//!   body's own, the rest its registers at the end), then [`COUNTERS`] words that atomics of
//!   every thread update, each word with one commutative operation;
//! - `inp`: [`INPUT`] read-only words ([`inputs`] gives them and `s`);
//! - `wild`: a raw address, which only [`Mode::Hostile`] programs use;
//! - `s`: a scalar, the bound of the rare long loops.
//!
//! Module-scope variables (which the sandbox relocates into each Store's globals block): `gw`, a
//! word per thread (the epilogue copies each thread's into its slot), and the read-only tables
//! `gt` (`.global`) and `gc` (`.const`), initialised.
//!
//! A [`Mode::Legal`] program's result depends only on its inputs, whatever order threads run in:
//! each thread writes only its own slot and its own shared words, reads other threads' shared
//! words only between two barriers, reads `.nc` only from the input, and its atomics commute. So
//! its bytes rewritten must equal its bytes as written, on any driver. Its loops end, some
//! early (breaks and continues); warp collectives run only in uniform code.

use std::fmt::Write as _;

/// Words of `out` each thread owns (its slot): the body's scratch, then the epilogue's dump.
pub const SLOT: u32 = 28;
/// Words of the slot the body may load and store.
pub const SCRATCH: u32 = 8;
/// Words of `out` after the slots that atomics of every thread update.
pub const COUNTERS: u32 = 16;
/// Words of each module-scope table, `gt` and `gc` (a power of two).
const GTAB: u32 = 16;
/// Words of the read-only input (a power of two).
pub const INPUT: u32 = 1024;
/// Blocks of every launch (the kernel assumes this grid).
pub const BLOCKS: u32 = 2;
/// Threads of every block: two warps.
pub const THREADS: u32 = 64;
/// Bytes of the static shared array (8 per thread of a block) and of the local one.
const SHARED: u32 = 8 * THREADS;
const LOCAL: u32 = 128;
/// Data registers the body reads and writes (`%r4` to `%r13`).
const DATA: [u32; 10] = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// Formats a line of the program: the arguments are evaluated before the generator is borrowed.
macro_rules! emit {
    ($g:expr, $($fmt:tt)*) => {{
        let line = format!($($fmt)*);
        $g.line(&line);
    }};
}

/// Whether a program stays in bounds (and must give the original's results) or attacks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Touches only its own buffers, in bounds and aligned; every loop ends.
    Legal,
    /// Forms addresses from its raw argument, wild offsets and out-of-range indices.
    Hostile,
}

/// A seeded xorshift generator (seed it odd: 0 stays 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A value in `0..n` (0 for `n` = 0).
    pub fn below(&mut self, n: u32) -> u32 {
        (self.bits() % u64::from(n.max(1))) as u32
    }
    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }
    /// One of `xs` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }
}

/// Writes one random program.
struct Gen {
    rng: Rng,
    mode: Mode,
    out: String,
    labels: u32,
    /// Loop nesting now (each level owns a counter and a bound register).
    loops: u32,
    /// Inside a branch or a loop: no barrier may be emitted.
    divergent: bool,
    /// Device functions written so far (callable from the kernel).
    funcs: u32,
    /// Instructions left to emit, so programs stay small.
    budget: u32,
    /// Hostile programs may have loops that never end.
    endless: bool,
    /// Each enclosing loop's exit and latch labels (for breaks and continues).
    exits: Vec<(String, String)>,
}

impl Gen {
    fn new(seed: u64, mode: Mode, endless: bool) -> Gen {
        Gen {
            endless,
            exits: Vec::new(),
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            mode,
            out: String::new(),
            labels: 0,
            loops: 0,
            divergent: false,
            funcs: 0,
            budget: 0,
        }
    }

    fn line(&mut self, s: &str) {
        self.out.push('\t');
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn label(&mut self) -> String {
        self.labels += 1;
        format!("$G{}", self.labels)
    }

    fn data(&mut self) -> String {
        format!("%r{}", self.rng.pick(&DATA))
    }

    /// A data register or a small constant.
    fn value(&mut self) -> String {
        if self.rng.chance(30) {
            format!("{}", self.rng.below(64))
        } else {
            self.data()
        }
    }

    fn guard(&mut self) -> String {
        match self.rng.below(10) {
            0 => format!("@%p{} ", self.rng.below(4)),
            1 => format!("@!%p{} ", self.rng.below(4)),
            _ => String::new(),
        }
    }

    /// The whole module: device functions, then the kernel.
    fn module(mut self) -> String {
        self.out
            .push_str(".version 8.0\n.target sm_90\n.address_size 64\n\n");
        self.globals();
        for _ in 0..self.rng.below(3) {
            self.func();
        }
        self.kernel();
        self.out
    }

    /// `.func (.param .b32 r) fN(.param .b32 x, .param .b32 y, .param .b64 p)` (the form
    /// nvcc writes): arithmetic on its arguments, maybe a loop, maybe loads through `p` (the
    /// input, or the raw argument).
    fn func(&mut self) {
        let n = self.funcs;
        let _ = writeln!(
            self.out,
            ".func (.param .b32 fr) f{n}(.param .b32 fx, .param .b32 fy, .param .b64 fp)\n{{\n\
             \t.reg .b32 %t<4>;\n\t.reg .b32 %fx, %fy, %fr;\n\t.reg .b64 %fp, %fa<2>;\n\
             \t.reg .pred %fq;"
        );
        self.line("ld.param.u32 %fx, [fx];");
        self.line("ld.param.u32 %fy, [fy];");
        self.line("ld.param.u64 %fp, [fp];");
        self.line("add.u32 %t0, %fx, %fy;");
        self.line("xor.b32 %t1, %fx, 1779033703;");
        if self.rng.chance(40) {
            // A local array of the function's own (its frame), written then read back.
            self.line(".local .align 4 .b8 fl[32];");
            self.line("mov.u64 %fa1, fl;");
            self.line("st.local.u32 [%fa1], %t0;");
            self.line("st.local.u32 [%fa1+28], %t1;");
            // Words 0 or 7: only what was written (local memory starts undefined on NVIDIA;
            // reading word 1 here made one run in nine differ on the H200).
            self.line("and.b32 %t3, %fy, 1;");
            self.line("mul.lo.u32 %t3, %t3, 28;");
            self.line("cvt.u64.u32 %fa0, %t3;");
            self.line("add.s64 %fa0, %fa1, %fa0;");
            self.line("ld.local.u32 %t2, [%fa0];");
            self.line("add.u32 %t1, %t1, %t2;");
        }
        if n > 0 && self.rng.chance(50) {
            // A call chain: an earlier function, with this one's pointer.
            let callee = self.rng.below(n);
            self.call_from("%t0", "%t1", "%fy", "%fp", callee);
        }
        if self.rng.chance(50) {
            let top = self.label();
            self.line("mov.u32 %t2, 0;");
            let _ = writeln!(self.out, "{top}:");
            self.line("mad.lo.u32 %t0, %t0, 33, %t1;");
            self.line("add.u32 %t2, %t2, 1;");
            let bound = if self.rng.chance(50) {
                format!("{}", 1 + self.rng.below(6))
            } else {
                self.line("and.b32 %t3, %fy, 7;");
                "%t3".into()
            };
            emit!(self, "setp.lt.u32 %fq, %t2, {bound};");
            emit!(self, "@%fq bra {top};");
        }
        if self.rng.chance(60) {
            match self.mode {
                Mode::Legal => {
                    emit!(self, "and.b32 %t3, %t0, {};", INPUT - 1);
                    self.line("mul.wide.u32 %fa0, %t3, 4;");
                    self.line("add.s64 %fa0, %fp, %fa0;");
                }
                Mode::Hostile => {
                    self.line("cvt.u64.u32 %fa1, %t0;");
                    self.line("add.s64 %fa0, %fp, %fa1;");
                }
            }
            self.line("ld.global.u32 %t1, [%fa0];");
            if self.mode == Mode::Hostile && self.rng.chance(50) {
                self.line("st.global.u32 [%fa0+4], %t0;");
            }
        }
        self.line("xor.b32 %fr, %t0, %t1;");
        self.line("st.param.b32 [fr], %fr;");
        self.line("ret;");
        self.out.push_str("}\n\n");
        self.funcs += 1;
    }

    fn kernel(&mut self) {
        self.out.push_str(
            ".visible .entry gen(.param .u64 out, .param .u64 inp, .param .u64 wild, \
             .param .u32 s)\n{\n",
        );
        for decl in [
            ".reg .pred %p<4>;",
            ".reg .b32 %r<16>;",
            ".reg .b64 %rd<8>;",
            ".reg .f32 %f<4>;",
            ".reg .b32 %c<3>;",
            ".reg .b32 %b<3>;",
            ".reg .b32 %k<3>;",
            ".reg .b32 %t<2>;",
            ".reg .b64 %a<4>;",
            ".reg .b32 %z;",
            ".reg .b32 %v<2>;",
        ] {
            self.line(decl);
        }
        emit!(self, ".shared .align 16 .b8 sh[{SHARED}];");
        emit!(self, ".local .align 16 .b8 loc[{LOCAL}];");
        // %rd0 out, %rd1 input, %rd2 the raw argument, %rd3 this thread's slot; %r0 tid.x,
        // %r1 ctaid.x, %r2 ntid.x, %r3 the global index, %r15 the scalar argument.
        self.line("ld.param.u64 %a0, [out];");
        self.line("cvta.to.global.u64 %rd0, %a0;");
        self.line("ld.param.u64 %a0, [inp];");
        self.line("cvta.to.global.u64 %rd1, %a0;");
        self.line("ld.param.u64 %rd2, [wild];");
        self.line("ld.param.u32 %r15, [s];");
        self.line("mov.u32 %r0, %tid.x;");
        self.line("mov.u32 %r1, %ctaid.x;");
        self.line("mov.u32 %r2, %ntid.x;");
        self.line("mad.lo.u32 %r3, %r1, %r2, %r0;");
        emit!(self, "mul.wide.u32 %rd3, %r3, {};", SLOT * 4);
        self.line("add.s64 %rd3, %rd0, %rd3;");
        for (i, r) in DATA.iter().enumerate() {
            let k = self.rng.below(1 << 16);
            emit!(self, "mad.lo.u32 %r{r}, %r3, {}, {k};", 2 * i + 1);
        }
        for p in 0..4 {
            let r = self.data();
            emit!(self, "setp.lt.u32 %p{p}, {r}, {};", self.rng.below(1 << 17));
        }
        for f in 0..4 {
            let r = self.data();
            emit!(self, "cvt.rn.f32.u32 %f{f}, {r};");
        }
        for rd in 4..8 {
            let r = self.data();
            emit!(
                self,
                "mul.wide.u32 %rd{rd}, {r}, {};",
                1 + self.rng.below(9)
            );
        }
        // Local memory and this thread's shared words start known, so every read of them is
        // of something written; then the block agrees before anyone reads another's words.
        self.line("mov.u64 %a1, loc;");
        for w in (0..LOCAL).step_by(16) {
            emit!(self, "st.local.v4.u32 [%a1+{w}], {{%r4, %r5, %r6, %r7}};");
        }
        self.line("mov.u64 %a1, sh;");
        self.line("mul.wide.u32 %a2, %r0, 8;");
        self.line("add.s64 %a1, %a1, %a2;");
        self.line("st.shared.v2.u32 [%a1], {%r8, %r9};");
        self.line("bar.sync 0;");
        self.budget = 40 + self.rng.below(80);
        self.block(0);
        // The epilogue: every data register into the slot, so any difference shows.
        for (i, r) in DATA.iter().enumerate() {
            emit!(
                self,
                "st.global.u32 [%rd3+{}], %r{r};",
                (SCRATCH + i as u32) * 4
            );
        }
        for f in 0..4u32 {
            emit!(self, "mov.b32 %z, %f{f};");
            emit!(self, "st.global.u32 [%rd3+{}], %z;", (SCRATCH + 10 + f) * 4);
        }
        self.line("add.s64 %rd4, %rd4, %rd5;");
        self.line("xor.b64 %rd4, %rd4, %rd6;");
        self.line("add.s64 %rd4, %rd4, %rd7;");
        emit!(self, "st.global.u64 [%rd3+{}], %rd4;", (SCRATCH + 14) * 4);
        self.line("mov.u64 %a1, gw;");
        self.line("mul.wide.u32 %a2, %r3, 4;");
        self.line("add.s64 %a1, %a1, %a2;");
        self.line("ld.global.u32 %z, [%a1];");
        emit!(self, "st.global.u32 [%rd3+{}], %z;", (SCRATCH + 16) * 4);
        self.line("ret;");
        self.out.push_str("}\n");
    }

    /// Statements until the budget or a random stop.
    fn block(&mut self, depth: u32) {
        let n = 1 + self.rng.below(if depth == 0 { 24 } else { 8 });
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            match self.rng.below(20) {
                0..=5 => self.arith(),
                6..=11 => self.memory(),
                12 | 13 if depth < 2 => self.branch(depth),
                14 | 15 if depth < 2 && self.loops < 3 => self.lp(depth),
                16 if self.funcs > 0 => self.call(),
                17 if !self.divergent => self.barrier_exchange(),
                18 => self.global_var_access(),
                19 if !self.divergent && self.rng.chance(50) => self.collective(),
                19 => self.loop_exit(),
                _ => self.arith(),
            }
        }
    }

    fn arith(&mut self) {
        let g = self.guard();
        let d = self.data();
        let a = self.data();
        let b = self.value();
        let s = match self.rng.below(14) {
            0 => format!("add.u32 {d}, {a}, {b};"),
            1 => format!("sub.u32 {d}, {a}, {b};"),
            2 => format!("mul.lo.u32 {d}, {a}, {b};"),
            3 => format!("and.b32 {d}, {a}, {b};"),
            4 => format!("or.b32 {d}, {a}, {b};"),
            5 => format!("xor.b32 {d}, {a}, {b};"),
            6 => format!("shl.b32 {d}, {a}, {};", self.rng.below(32)),
            7 => format!("shr.u32 {d}, {a}, {};", self.rng.below(32)),
            8 => {
                let c = self.data();
                format!("mad.lo.u32 {d}, {a}, {b}, {c};")
            }
            9 => {
                let p = self.rng.below(4);
                let cmp = self.rng.pick(&["lt", "le", "gt", "ge", "eq", "ne"]);
                format!("setp.{cmp}.u32 %p{p}, {a}, {b};")
            }
            10 => format!("selp.b32 {d}, {a}, {b}, %p{};", self.rng.below(4)),
            11 => {
                let (f, x) = (self.rng.below(4), self.rng.below(4));
                let y = self.rng.below(4);
                format!("fma.rn.f32 %f{f}, %f{x}, %f{y}, %f{f};")
            }
            12 => {
                let rd = 4 + self.rng.below(4);
                format!(
                    "mad.wide.u32 %rd{rd}, {a}, {}, %rd{rd};",
                    1 + self.rng.below(99)
                )
            }
            _ => {
                let rd = 4 + self.rng.below(4);
                format!("cvt.u32.u64 {d}, %rd{rd};")
            }
        };
        emit!(self, "{g}{s}");
    }

    /// A word index of the slot's scratch into `%t0` (a register-chosen one, or a constant).
    fn scratch_address(&mut self, align_words: u32) {
        let r = self.data();
        emit!(
            self,
            "and.b32 %t0, {r}, {};",
            (SCRATCH - 1) & !(align_words - 1)
        );
        self.line("mul.wide.u32 %a1, %t0, 4;");
        self.line("add.s64 %a1, %rd3, %a1;");
    }

    /// An aligned input word into `%a1`.
    fn input_address(&mut self, align_words: u32) {
        let r = self.data();
        emit!(
            self,
            "and.b32 %t0, {r}, {};",
            (INPUT - 1) & !(align_words - 1)
        );
        self.line("mul.wide.u32 %a1, %t0, 4;");
        self.line("add.s64 %a1, %rd1, %a1;");
    }

    /// A hostile address into `%a1`: from the raw argument, from the slot with a wild
    /// offset, or from data, maybe misaligned.
    fn wild_address(&mut self) {
        match self.rng.below(4) {
            0 => self.line("mov.u64 %a1, %rd2;"),
            1 => {
                let off = self.rng.pick(&[
                    -8i64,
                    4096,
                    1 << 20,
                    -(1 << 20),
                    1 << 40,
                    -(1 << 40),
                    3,
                    64 << 20,
                    i64::MAX,
                ]);
                emit!(self, "add.s64 %a1, %rd3, {off};");
            }
            2 => {
                let r = self.data();
                emit!(self, "cvt.u64.u32 %a1, {r};");
                self.line("add.s64 %a1, %rd2, %a1;");
            }
            _ => {
                let r = self.data();
                emit!(self, "mul.wide.u32 %a1, {r}, 4099;");
                self.line("add.s64 %a1, %rd3, %a1;");
            }
        }
        if self.rng.chance(30) {
            emit!(self, "add.s64 %a1, %a1, {};", self.rng.below(8));
        }
    }

    fn memory(&mut self) {
        match self.rng.below(9) {
            0..=2 => self.global_access(),
            3 => self.atomic(),
            4 => self.generic_access(),
            5 | 6 => self.shared_access(),
            _ => self.local_access(),
        }
    }

    /// Loads from the input (plain, `.nc`, vector) or loads and stores in the slot, of every
    /// width: bytes, halves, words, double words, and vectors of two and four words.
    fn global_access(&mut self) {
        let d = self.data();
        // A second, different register for the vector forms' other lane.
        let e = format!("%r{}", if d == "%r4" { 5 } else { 4 });
        let wide = format!("%rd{}", 4 + self.rng.below(4));
        let width = self.rng.pick(&["u8", "u16", "u32", "u64", "v2", "v4"]);
        let align_words = match width {
            "u64" | "v2" => 2,
            "v4" => 4,
            _ => 1,
        };
        let mut from_input = false;
        if self.mode == Mode::Hostile && self.rng.chance(70) {
            self.wild_address();
            from_input = true;
        } else if self.rng.chance(50) {
            self.input_address(align_words);
            from_input = true;
        } else {
            self.scratch_address(align_words);
        }
        // Bytes and halves anywhere in their word.
        match width {
            "u8" => emit!(self, "add.s64 %a1, %a1, {};", self.rng.below(4)),
            "u16" => emit!(self, "add.s64 %a1, %a1, {};", 2 * self.rng.below(2)),
            _ => {}
        }
        let g = self.guard();
        let store = if from_input {
            // The input is read-only, unless the program attacks.
            self.mode == Mode::Hostile && self.rng.chance(40)
        } else {
            self.rng.chance(50)
        };
        if store {
            match width {
                "u64" => emit!(self, "{g}st.global.u64 [%a1], {wide};"),
                "v2" => emit!(self, "{g}st.global.v2.u32 [%a1], {{{d}, {e}}};"),
                "v4" => emit!(self, "{g}st.global.v4.u32 [%a1], {{%r4, {d}, %r6, {e}}};"),
                w => emit!(self, "{g}st.global.{w} [%a1], {d};"),
            }
            return;
        }
        // `.nc` reads through the non-coherent path: only of what no thread writes.
        let nc = if from_input && self.rng.chance(40) {
            ".nc"
        } else {
            ""
        };
        match width {
            "u64" => emit!(self, "{g}ld.global{nc}.u64 {wide}, [%a1];"),
            "v2" => emit!(self, "{g}ld.global{nc}.v2.u32 {{{d}, %v0}}, [%a1];"),
            "v4" => emit!(
                self,
                "{g}ld.global{nc}.v4.u32 {{%v0, {d}, %v1, {e}}}, [%a1];"
            ),
            w => emit!(self, "{g}ld.global{nc}.{w} {d}, [%a1];"),
        }
    }

    /// An atomic that commutes (so the order threads take it in does not change the result)
    /// on a shared counter, its old value dropped. Each counter word has one operation: mixed
    /// on one word, `add` and `or` would not commute.
    fn atomic(&mut self) {
        const OPS: [&str; 5] = ["add.u32", "or.b32", "xor.b32", "max.u32", "min.u32"];
        let v = self.data();
        let counter = self.rng.below(COUNTERS);
        let op = OPS[(counter % 5) as usize];
        if self.mode == Mode::Hostile && self.rng.chance(70) {
            self.wild_address();
        } else {
            let w = SLOT * BLOCKS * THREADS + counter;
            emit!(self, "add.s64 %a1, %rd0, {};", w * 4);
        }
        let g = self.guard();
        if self.rng.chance(50) {
            emit!(self, "{g}atom.global.{op} %z, [%a1], {v};");
        } else {
            emit!(self, "{g}red.global.{op} [%a1], {v};");
        }
    }

    /// A load or store through a generic address made from a global one.
    fn generic_access(&mut self) {
        let d = self.data();
        match self.mode {
            Mode::Hostile if self.rng.chance(70) => {
                self.wild_address();
                self.line("mov.u64 %a2, %a1;");
            }
            _ => {
                self.scratch_address(1);
                self.line("cvta.global.u64 %a2, %a1;");
            }
        }
        let g = self.guard();
        if self.rng.chance(50) {
            emit!(self, "{g}ld.u32 {d}, [%a2];");
        } else {
            emit!(self, "{g}st.u32 [%a2], {d};");
        }
    }

    /// This thread's two shared words (maybe through a generic address), or wild indices.
    fn shared_access(&mut self) {
        let d = self.data();
        self.line("mov.u64 %a1, sh;");
        if self.mode == Mode::Hostile && self.rng.chance(60) {
            let r = self.data();
            emit!(self, "cvt.u64.u32 %a2, {r};");
        } else {
            self.line("mul.wide.u32 %a2, %r0, 8;");
            if self.rng.chance(50) {
                self.line("add.s64 %a2, %a2, 4;");
            }
        }
        self.line("add.s64 %a1, %a1, %a2;");
        let g = self.guard();
        let store = self.rng.chance(50);
        if self.rng.chance(30) {
            self.line("cvta.shared.u64 %a1, %a1;");
            if store {
                emit!(self, "{g}st.u32 [%a1], {d};");
            } else {
                emit!(self, "{g}ld.u32 {d}, [%a1];");
            }
        } else if store {
            emit!(self, "{g}st.shared.u32 [%a1], {d};");
        } else {
            emit!(self, "{g}ld.shared.u32 {d}, [%a1];");
        }
    }

    /// A local word by a masked index (maybe through a generic address), or a wild index.
    fn local_access(&mut self) {
        let d = self.data();
        let r = self.data();
        self.line("mov.u64 %a1, loc;");
        if self.mode == Mode::Hostile && self.rng.chance(60) {
            emit!(self, "cvt.u64.u32 %a2, {r};");
        } else {
            emit!(self, "and.b32 %t1, {r}, {};", LOCAL / 4 - 1);
            self.line("mul.wide.u32 %a2, %t1, 4;");
        }
        self.line("add.s64 %a1, %a1, %a2;");
        let g = self.guard();
        let store = self.rng.chance(50);
        if self.rng.chance(30) {
            self.line("cvta.local.u64 %a1, %a1;");
            if store {
                emit!(self, "{g}st.u32 [%a1], {d};");
            } else {
                emit!(self, "{g}ld.u32 {d}, [%a1];");
            }
        } else if store {
            emit!(self, "{g}st.local.u32 [%a1], {d};");
        } else {
            emit!(self, "{g}ld.local.u32 {d}, [%a1];");
        }
    }

    /// Reads another thread's shared words between two barriers (uniform code only).
    fn barrier_exchange(&mut self) {
        let (d, r) = (self.data(), self.data());
        self.line("bar.sync 0;");
        emit!(self, "and.b32 %t1, {r}, {};", THREADS - 1);
        self.line("mul.wide.u32 %a2, %t1, 8;");
        self.line("mov.u64 %a1, sh;");
        self.line("add.s64 %a1, %a1, %a2;");
        emit!(self, "ld.shared.u32 {d}, [%a1];");
        self.line("bar.sync 0;");
    }

    /// A guarded block: short ones are what if-conversion predicates.
    fn branch(&mut self, depth: u32) {
        let skip = self.label();
        let (a, b) = (self.data(), self.value());
        let cmp = self.rng.pick(&["lt", "ge", "eq", "ne"]);
        emit!(self, "setp.{cmp}.u32 %p3, {a}, {b};");
        emit!(self, "@%p3 bra {skip};");
        let was = std::mem::replace(&mut self.divergent, true);
        self.block(depth + 1);
        self.divergent = was;
        let _ = writeln!(self.out, "{skip}:");
    }

    /// A loop in one of the shapes loop versioning copies (`c += k` while `c < C` or
    /// `c <= C`, signed or unsigned, `C` and `k` constants or registers), or others.
    /// - Legal: every loop ends, in at most a few dozen iterations; rarely a long one (up to
    ///   2,500, past a poll interval of 1,024).
    /// - Hostile: a third may never end (a step of 0, a counter that wraps past its bound, a
    ///   signed bound it never reaches), which only the abort epoch stops.
    fn lp(&mut self, depth: u32) {
        let level = self.loops;
        let top = self.label();
        let (c, b, k) = (
            format!("%c{level}"),
            format!("%b{level}"),
            format!("%k{level}"),
        );
        let (r, r2) = (self.data(), self.data());
        let endless = self.mode == Mode::Hostile && self.endless && self.rng.chance(33);
        let long = !endless && self.rng.chance(10);
        let signed = self.rng.chance(30);
        let cmp = match (signed, self.rng.chance(30)) {
            (false, false) => "lt.u32",
            (false, true) => "le.u32",
            (true, false) => "lt.s32",
            (true, true) => "le.s32",
        };
        let (step, bound) = if long {
            emit!(self, "mov.u32 {c}, 0;");
            emit!(self, "min.u32 {b}, %r15, 2500;");
            ("1".to_string(), b.clone())
        } else if endless {
            match self.rng.below(3) {
                // A step that may be 0.
                0 => {
                    emit!(self, "and.b32 {c}, {r}, 7;");
                    emit!(self, "and.b32 {k}, {r2}, 1;");
                    emit!(self, "add.u32 {b}, {c}, 5;");
                }
                // A counter that wraps past its bound.
                1 => {
                    let top = if signed { 0x7fff_fff0u32 } else { 0xffff_fff0 };
                    emit!(self, "mov.u32 {c}, {};", top - 64);
                    emit!(self, "mov.u32 {k}, 48;");
                    emit!(self, "mov.u32 {b}, {};", top + 8);
                }
                // A bound from the data, and a step of 1 or of a data register.
                _ => {
                    emit!(self, "mov.u32 {c}, {r};");
                    emit!(self, "or.b32 {k}, {r2}, 1;");
                    emit!(self, "xor.b32 {b}, {r}, {r2};");
                }
            }
            (k.clone(), b.clone())
        } else {
            // Starts at or below zero (signed), steps of 1 to 4, at most 16 values apart: far
            // from wrapping either way.
            emit!(self, "and.b32 {c}, {r}, 7;");
            if signed {
                emit!(self, "sub.u32 {c}, {c}, 4;");
            }
            let step = if self.rng.chance(50) {
                format!("{}", 1 + self.rng.below(3))
            } else {
                emit!(self, "and.b32 {k}, {r2}, 3;");
                emit!(self, "add.u32 {k}, {k}, 1;");
                k.clone()
            };
            let bound = if self.rng.chance(30) {
                emit!(self, "add.u32 {b}, {c}, {};", 1 + self.rng.below(12));
                b.clone()
            } else if signed {
                format!("{}", self.rng.below(8))
            } else {
                format!("{}", 8 + self.rng.below(8))
            };
            (step, bound)
        };
        let _ = writeln!(self.out, "{top}:");
        self.loops += 1;
        let (exit, latch) = (self.label(), self.label());
        self.exits.push((exit.clone(), latch.clone()));
        let was = std::mem::replace(&mut self.divergent, true);
        if long {
            // A long loop's body stays small, so a case runs in milliseconds.
            self.arith();
            self.arith();
        } else {
            self.block(depth + 1);
        }
        self.divergent = was;
        self.exits.pop();
        self.loops -= 1;
        let _ = writeln!(self.out, "{latch}:");
        emit!(self, "add.u32 {c}, {c}, {step};");
        emit!(self, "setp.{cmp} %p3, {c}, {bound};");
        emit!(self, "@%p3 bra {top};");
        let _ = writeln!(self.out, "{exit}:");
    }

    fn call(&mut self) {
        let f = self.rng.below(self.funcs);
        let (d, x, y) = (self.data(), self.data(), self.data());
        let p = match self.mode {
            Mode::Hostile => "%rd2",
            Mode::Legal => "%rd1",
        };
        self.call_from(&d, &x, &y, p, f);
    }

    /// `d = f(x, y, p)`, its arguments and result passed in `.param` space as nvcc does.
    fn call_from(&mut self, d: &str, x: &str, y: &str, p: &str, f: u32) {
        self.line("{");
        self.line(".param .b32 a0;");
        emit!(self, "st.param.b32 [a0], {x};");
        self.line(".param .b32 a1;");
        emit!(self, "st.param.b32 [a1], {y};");
        self.line(".param .b64 a2;");
        emit!(self, "st.param.b64 [a2], {p};");
        self.line(".param .b32 rv;");
        emit!(self, "call (rv), f{f}, (a0, a1, a2);");
        emit!(self, "ld.param.b32 {d}, [rv];");
        self.line("}");
    }

    /// Module-scope variables, relocated by the sandbox into each Store's globals block:
    /// `gw`, a word per thread (each thread's own, so legal programs write it without races),
    /// and read-only tables with initialisers, `.global` and `.const`.
    fn globals(&mut self) {
        let _ = writeln!(self.out, ".global .align 4 .u32 gw[{}];", BLOCKS * THREADS);
        let init = |rng: &mut Rng, n: u32| -> String {
            (0..n)
                .map(|_| rng.below(1 << 20).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let gt = init(&mut self.rng, GTAB);
        let _ = writeln!(self.out, ".global .align 8 .u32 gt[{GTAB}] = {{{gt}}};");
        let gc = init(&mut self.rng, GTAB);
        let _ = writeln!(self.out, ".const .align 8 .u32 gc[{GTAB}] = {{{gc}}};\n");
    }

    /// This thread's `gw` word (read, written, or updated atomically), a table word by a
    /// masked index or at a fixed offset, or (hostile) a table word far out of range.
    fn global_var_access(&mut self) {
        let d = self.data();
        let hostile = self.mode == Mode::Hostile && self.rng.chance(60);
        let g = self.guard();
        match self.rng.below(4) {
            0 | 1 => {
                self.line("mov.u64 %a1, gw;");
                if hostile {
                    let r = self.data();
                    emit!(self, "mul.wide.u32 %a2, {r}, 4;");
                } else {
                    self.line("mul.wide.u32 %a2, %r3, 4;");
                }
                self.line("add.s64 %a1, %a1, %a2;");
                match self.rng.below(4) {
                    0 => emit!(self, "{g}st.global.u32 [%a1], {d};"),
                    1 => emit!(self, "{g}atom.global.add.u32 %z, [%a1], {d};"),
                    2 => {
                        self.line("cvta.global.u64 %a2, %a1;");
                        emit!(self, "{g}st.u32 [%a2], {d};");
                    }
                    _ => emit!(self, "{g}ld.global.u32 {d}, [%a1];"),
                }
            }
            k => {
                let (table, space) = if k == 2 {
                    ("gt", "global")
                } else {
                    ("gc", "const")
                };
                if self.rng.chance(40) && !hostile {
                    let at = 4 * self.rng.below(GTAB);
                    emit!(self, "{g}ld.{space}.u32 {d}, [{table}+{at}];");
                } else {
                    let r = self.data();
                    emit!(self, "mov.u64 %a1, {table};");
                    if hostile {
                        emit!(self, "cvt.u64.u32 %a2, {r};");
                    } else {
                        emit!(self, "and.b32 %t0, {r}, {};", GTAB - 1);
                        self.line("mul.wide.u32 %a2, %t0, 4;");
                    }
                    self.line("add.s64 %a1, %a1, %a2;");
                    emit!(self, "{g}ld.{space}.u32 {d}, [%a1];");
                }
            }
        }
    }

    /// A warp collective, in uniform code only (every lane of the warp takes part).
    fn collective(&mut self) {
        let (d, a) = (self.data(), self.data());
        match self.rng.below(3) {
            0 => emit!(
                self,
                "shfl.sync.bfly.b32 {d}, {a}, {}, 31, -1;",
                1 << self.rng.below(5)
            ),
            1 => emit!(
                self,
                "shfl.sync.idx.b32 {d}, {a}, {}, 31, -1;",
                self.rng.below(32)
            ),
            _ => emit!(
                self,
                "vote.sync.ballot.b32 {d}, %p{}, -1;",
                self.rng.below(4)
            ),
        }
    }

    /// Leaves the innermost loop, or goes on to its next iteration, on a data condition.
    fn loop_exit(&mut self) {
        let Some((brk, cont)) = self.exits.last().cloned() else {
            return self.arith();
        };
        let (a, b) = (self.data(), self.value());
        emit!(self, "setp.gt.u32 %p2, {a}, {b};");
        let target = if self.rng.chance(50) { brk } else { cont };
        emit!(self, "@%p2 bra {target};");
    }
}

/// Bytes of the `out` buffer.
pub fn out_bytes() -> usize {
    ((SLOT * BLOCKS * THREADS + COUNTERS) * 4) as usize
}

/// Bytes of the `inp` buffer.
pub fn input_bytes() -> usize {
    (INPUT * 4) as usize
}

/// The program of `seed` in `mode`; hostile programs may have loops that never end, which only
/// the sandbox's abort epoch stops.
pub fn program(seed: u64, mode: Mode) -> String {
    Gen::new(seed, mode, true).module()
}

/// [`program`], but every loop ends (for drivers where a test cannot stop a kernel at will).
pub fn program_ending(seed: u64, mode: Mode) -> String {
    Gen::new(seed, mode, false).module()
}

/// The case's input words (as bytes) and its scalar `s` (the long loops' bound, 1,500 in half of
/// the cases).
pub fn inputs(seed: u64) -> (Vec<u8>, u32) {
    let mut rng = Rng((seed ^ 0x51_7cc1_b727_220a) | 1);
    let input: Vec<u8> = (0..INPUT)
        .flat_map(|_| (rng.bits() as u32).to_le_bytes())
        .collect();
    let s = if rng.chance(50) { 1500 } else { rng.below(40) };
    (input, s)
}

/// The first differing words of two `out` images, as `thread:word want/got` (the counters are
/// thread [`BLOCKS`] × [`THREADS`]).
pub fn differences(want: &[u8], got: &[u8]) -> String {
    let words = |b: &[u8]| -> Vec<u32> {
        b.chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    };
    let (w, g) = (words(want), words(got));
    let differ: Vec<usize> = (0..w.len().min(g.len()))
        .filter(|&i| w[i] != g[i])
        .collect();
    let first: Vec<String> = differ
        .iter()
        .take(8)
        .map(|&i| {
            let (t, k) = (i / SLOT as usize, i % SLOT as usize);
            format!("{t}:{k} {:#x}/{:#x}", w[i], g[i])
        })
        .collect();
    format!("{} words, first {}", differ.len(), first.join(", "))
}

#[cfg(test)]
mod tests {
    use super::{Mode, program};

    #[test]
    fn the_generator_writes_every_family_it_promises() {
        // A generator that silently stopped writing a family would test nothing of it.
        let all: String = (1..200)
            .flat_map(|s| [program(s, Mode::Legal), program(s, Mode::Hostile)])
            .collect();
        for needle in [
            "ld.global.nc.",
            ".v4.u32",
            "st.global.u8",
            "ld.global.u16",
            "ld.global.u64",
            "atom.global.",
            "red.global.",
            "cvta.shared.u64",
            "cvta.local.u64",
            "cvta.global.u64",
            "st.shared.u32",
            "ld.local.u32",
            "bar.sync 0;",
            "call (rv)",
            "min.u32 %b",
            "le.s32 %p3, %c",
            "mov.u32 %k0, 48;",
            "@!%p",
            "add.s64 %a1, %rd3, 1099511627776;",
            "ld.const.u32",
            "[gt+",
            "atom.global.add.u32 %z, [%a1]",
            "shfl.sync.bfly.b32",
            "vote.sync.ballot.b32",
            "st.local.u32 [%fa1]",
            "@%p2 bra $G",
        ] {
            assert!(all.contains(needle), "no generated program has {needle}");
        }
    }

    #[test]
    fn a_seed_always_gives_the_same_program() {
        assert_eq!(program(7, Mode::Hostile), program(7, Mode::Hostile));
        assert_ne!(program(7, Mode::Legal), program(8, Mode::Legal));
    }
}
