//! The generator's state and the program's frame: the module (globals, functions, the kernel),
//! the kernel's prologue and epilogue, blocks of statements, and arithmetic.

use std::fmt::Write as _;

use super::{BLOCKS, DATA, GTAB, LOCAL, Mode, Rng, SCRATCH, SHARED, SLOT, THREADS};

/// Writes one random program.
pub(super) struct Gen {
    pub(super) rng: Rng,
    pub(super) mode: Mode,
    pub(super) out: String,
    pub(super) labels: u32,
    /// Loop nesting now (each level owns a counter and a bound register).
    pub(super) loops: u32,
    /// Inside a branch or a loop: no barrier may be emitted.
    pub(super) divergent: bool,
    /// Device functions written so far (callable from the kernel).
    pub(super) funcs: u32,
    /// Instructions left to emit, so programs stay small.
    pub(super) budget: u32,
    /// Hostile programs may have loops that never end.
    pub(super) endless: bool,
    /// Each enclosing loop's exit and latch labels (for breaks and continues).
    pub(super) exits: Vec<(String, String)>,
    /// Tensor-core reads (`ldmatrix`) in uniform code too. Off, the generator draws exactly
    /// what it drew before they existed, so every recorded seed keeps its program.
    pub(super) matrix: bool,
    /// Count-down loops (`setp.ne` back-edges, as nvcc rotates counted loops) among the loop
    /// shapes; off, the generator draws what it drew before, as for `matrix`.
    pub(super) countdown: bool,
    /// Barrier exchanges through `mbarrier` (the sandbox's software barriers) in uniform code
    /// too; off, the generator draws what it drew before, as for `matrix`.
    pub(super) mbarrier: bool,
}

impl Gen {
    pub(super) fn new(seed: u64, mode: Mode, endless: bool) -> Gen {
        Gen {
            endless,
            exits: Vec::new(),
            matrix: false,
            countdown: false,
            mbarrier: false,
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

    pub(super) fn line(&mut self, s: &str) {
        self.out.push('\t');
        self.out.push_str(s);
        self.out.push('\n');
    }

    pub(super) fn label(&mut self) -> String {
        self.labels += 1;
        format!("$G{}", self.labels)
    }

    pub(super) fn data(&mut self) -> String {
        format!("%r{}", self.rng.pick(&DATA))
    }

    /// A data register or a small constant.
    pub(super) fn value(&mut self) -> String {
        if self.rng.chance(30) {
            format!("{}", self.rng.below(64))
        } else {
            self.data()
        }
    }

    pub(super) fn guard(&mut self) -> String {
        match self.rng.below(10) {
            0 => format!("@%p{} ", self.rng.below(4)),
            1 => format!("@!%p{} ", self.rng.below(4)),
            _ => String::new(),
        }
    }

    /// The whole module: device functions, then the kernel.
    pub(super) fn module(mut self) -> String {
        self.out
            .push_str(".version 8.0\n.target sm_90\n.address_size 64\n\n");
        self.globals();
        for _ in 0..self.rng.below(3) {
            self.func();
        }
        self.kernel();
        self.out
    }

    pub(super) fn kernel(&mut self) {
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
        if self.mbarrier {
            self.line(".reg .b64 %ms;");
            self.line(".reg .pred %mq;");
            self.line(".shared .align 8 .b64 mb;");
        }
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
    pub(super) fn block(&mut self, depth: u32) {
        let n = 1 + self.rng.below(if depth == 0 { 24 } else { 8 });
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            match self.rng.below(20) {
                0..=5 => self.arith(),
                6..=11 => self.memory(),
                12 if depth < 2 => self.branch(depth),
                13 if depth < 2 => self.switch(depth),
                14 | 15 if depth < 2 && self.loops < 3 => self.lp(depth),
                16 if self.funcs > 0 => self.call(),
                17 if !self.divergent => {
                    if self.matrix && self.rng.chance(50) {
                        self.matrix_exchange();
                    } else if self.mbarrier && self.rng.chance(50) {
                        self.mbarrier_exchange();
                    } else {
                        self.barrier_exchange();
                    }
                }
                18 => self.global_var_access(),
                19 if !self.divergent && self.rng.chance(50) => self.collective(),
                19 => self.loop_exit(),
                _ => self.arith(),
            }
        }
    }

    pub(super) fn arith(&mut self) {
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

    /// Module-scope variables, relocated by the sandbox into each Store's globals block:
    /// `gw`, a word per thread (each thread's own, so legal programs write it without races),
    /// and read-only tables with initialisers, `.global` and `.const`.
    pub(super) fn globals(&mut self) {
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
}
