//! Control flow: device functions and calls, guarded blocks, jump tables, loops of every shape
//! (endless ones in hostile programs), breaks and continues, and warp collectives.

use std::fmt::Write as _;

use super::frame::Gen;
use super::{INPUT, Mode};

impl Gen {
    /// `.func (.param .b32 r) fN(.param .b32 x, .param .b32 y, .param .b64 p)` (the form
    /// nvcc writes): arithmetic on its arguments, maybe a loop, maybe loads through `p` (the
    /// input, or the raw argument).
    pub(super) fn func(&mut self) {
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

    /// A guarded block: short ones are what if-conversion predicates.
    pub(super) fn branch(&mut self, depth: u32) {
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

    /// A jump through a `.branchtargets` table: three cases, each a block, then a join. A legal
    /// index is the data modulo 3; a hostile one is the data itself (past the table: the sandbox
    /// clamps it).
    pub(super) fn switch(&mut self, depth: u32) {
        let table = self.label();
        let cases = [self.label(), self.label(), self.label()];
        let join = self.label();
        let r = self.data();
        match self.mode {
            Mode::Legal => emit!(self, "rem.u32 %t0, {r}, 3;"),
            Mode::Hostile => emit!(self, "mov.b32 %t0, {r};"),
        }
        emit!(
            self,
            "{table}: .branchtargets {}, {}, {};",
            cases[0],
            cases[1],
            cases[2]
        );
        emit!(self, "brx.idx %t0, {table};");
        let was = std::mem::replace(&mut self.divergent, true);
        for (k, case) in cases.iter().enumerate() {
            let _ = writeln!(self.out, "{case}:");
            self.block(depth + 1);
            if k + 1 < cases.len() {
                emit!(self, "bra {join};");
            }
        }
        self.divergent = was;
        let _ = writeln!(self.out, "{join}:");
    }

    /// A loop in one of the shapes loop versioning copies (`c += k` while `c < C` or
    /// `c <= C`, signed or unsigned, `C` and `k` constants or registers), or others.
    /// - Legal: every loop ends, in at most a few dozen iterations; rarely a long one (up to
    ///   2,500, past a poll interval of 1,024).
    /// - Hostile: a third may never end (a step of 0, a counter that wraps past its bound, a
    ///   signed bound it never reaches), which only the abort epoch stops.
    pub(super) fn lp(&mut self, depth: u32) {
        if self.countdown && self.rng.chance(50) {
            return self.countdown_lp(depth);
        }
        let (top, [c, b, k], [r, r2], endless, long) = self.loop_head();
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
        let back = [
            format!("add.u32 {c}, {c}, {step};"),
            format!("setp.{cmp} %p3, {c}, {bound};"),
            format!("@%p3 bra {top};"),
        ];
        self.loop_from(&top, long, depth, &back);
    }

    /// A new loop's header label, its level's counter, bound and step registers, two data
    /// registers to set them from, and whether it may never end (hostile only) or runs long.
    fn loop_head(&mut self) -> (String, [String; 3], [String; 2], bool, bool) {
        let level = self.loops;
        let top = self.label();
        let data = [self.data(), self.data()];
        let endless = self.mode == Mode::Hostile && self.endless && self.rng.chance(33);
        let long = !endless && self.rng.chance(10);
        let regs = ["c", "b", "k"].map(|x| format!("%{x}{level}"));
        (top, regs, data, endless, long)
    }

    /// The rest of a loop whose counter is set: its header `top`, its body (a small one when
    /// `long`), then its latch, where `back` counts and branches back.
    fn loop_from(&mut self, top: &str, long: bool, depth: u32, back: &[String]) {
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
        for line in back {
            self.line(line);
        }
        let _ = writeln!(self.out, "{exit}:");
    }

    /// A count-down loop, as nvcc rotates counted loops (`add c, c, -2; setp.ne c, 0; @p bra`):
    /// the back-edge taken while the counter differs from its bound (`setp.ne` and `@p`, or
    /// `setp.eq` and `@!p`; the compare after the add or before it), stepping by an immediate or
    /// a register of either sign, toward a bound of 0 or a register.
    /// - Legal: the counter meets its bound after 1 to 16 steps; rarely a long one (up to 2,500
    ///   steps of -2, past a poll interval of 1,024).
    /// - Hostile: a third may never meet it (an odd start stepping by -2 toward 0, a start at
    ///   the bound, a step of 0, or start and step from the data), which only the abort epoch
    ///   stops.
    fn countdown_lp(&mut self, depth: u32) {
        let (top, [c, b, k], [r, r2], endless, long) = self.loop_head();
        let (step, bound) = if long {
            emit!(self, "min.u32 {c}, %r15, 2500;");
            emit!(self, "add.u32 {c}, {c}, 1;");
            emit!(self, "shl.b32 {c}, {c}, 1;");
            ("-2".to_string(), "0".to_string())
        } else if endless {
            match self.rng.below(4) {
                // An odd start stepping by -2 toward 0: it steps over it, and wraps for ever.
                0 => {
                    emit!(self, "or.b32 {c}, {r}, 1;");
                    ("-2".to_string(), "0".to_string())
                }
                // A start at the bound: 2^32 steps before it meets it again.
                1 => {
                    emit!(self, "and.b32 {b}, {r}, 255;");
                    emit!(self, "mov.u32 {c}, {b};");
                    ("1".to_string(), b.clone())
                }
                // A step that may be 0.
                2 => {
                    emit!(self, "and.b32 {c}, {r}, 7;");
                    emit!(self, "and.b32 {k}, {r2}, 1;");
                    emit!(self, "add.u32 {b}, {c}, 5;");
                    (k.clone(), b.clone())
                }
                // Start and step from the data.
                _ => {
                    emit!(self, "mov.u32 {c}, {r};");
                    emit!(self, "mov.u32 {k}, {r2};");
                    (k.clone(), "0".to_string())
                }
            }
        } else {
            // The counter starts `trips` steps of `m` from the bound, on the side the step's
            // sign leaves it.
            let trips = 1 + self.rng.below(16);
            let m = 1 + self.rng.below(4);
            let bound = if self.rng.chance(50) {
                emit!(self, "and.b32 {b}, {r}, 15;");
                b.clone()
            } else {
                "0".to_string()
            };
            let down = self.rng.chance(60);
            let span = trips * m;
            let toward = if down { "add" } else { "sub" };
            emit!(self, "{toward}.u32 {c}, {bound}, {span};");
            let step = if self.rng.chance(50) {
                if down {
                    format!("-{m}")
                } else {
                    format!("{m}")
                }
            } else {
                emit!(self, "mov.u32 {k}, {m};");
                if down {
                    emit!(self, "neg.s32 {k}, {k};");
                }
                k.clone()
            };
            (step, bound)
        };
        let (cmp, guard) = if self.rng.chance(70) {
            ("ne", "@%p3")
        } else {
            ("eq", "@!%p3")
        };
        let add = format!("add.u32 {c}, {c}, {step};");
        let setp = format!("setp.{cmp}.u32 %p3, {c}, {bound};");
        // A compare before the add reads the counter before its step, so the loop runs one
        // trip more; a legal loop takes one step ahead of it to keep its trip count.
        let back = if self.rng.chance(25) {
            if !long && !endless {
                emit!(self, "add.u32 {c}, {c}, {step};");
            }
            [setp, add, format!("{guard} bra {top};")]
        } else {
            [add, setp, format!("{guard} bra {top};")]
        };
        self.loop_from(&top, long, depth, &back);
    }

    pub(super) fn call(&mut self) {
        let f = self.rng.below(self.funcs);
        let (d, x, y) = (self.data(), self.data(), self.data());
        let p = match self.mode {
            Mode::Hostile => "%rd2",
            Mode::Legal => "%rd1",
        };
        self.call_from(&d, &x, &y, p, f);
    }

    /// `d = f(x, y, p)`, its arguments and result passed in `.param` space as nvcc does.
    pub(super) fn call_from(&mut self, d: &str, x: &str, y: &str, p: &str, f: u32) {
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

    /// A warp collective, in uniform code only (every lane of the warp takes part).
    pub(super) fn collective(&mut self) {
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
    pub(super) fn loop_exit(&mut self) {
        let Some((brk, cont)) = self.exits.last().cloned() else {
            return self.arith();
        };
        let (a, b) = (self.data(), self.value());
        emit!(self, "setp.gt.u32 %p2, {a}, {b};");
        let target = if self.rng.chance(50) { brk } else { cont };
        emit!(self, "@%p2 bra {target};");
    }
}
