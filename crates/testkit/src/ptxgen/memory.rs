//! Memory accesses of every space and form: the thread's own global words, the read-only input
//! and tables, atomics on the shared counters, generic, shared and local accesses, the barrier
//! exchange (through `bar.sync`, `ldmatrix` rows or `mbarrier`), and (hostile) wild addresses.

use std::fmt::Write as _;

use super::frame::Gen;
use super::{BLOCKS, COUNTERS, GTAB, INPUT, LOCAL, Mode, SCRATCH, SHARED, SLOT, THREADS};

impl Gen {
    /// A word index of the slot's scratch into `%t0` (a register-chosen one, or a constant).
    pub(super) fn scratch_address(&mut self, align_words: u32) {
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
    pub(super) fn input_address(&mut self, align_words: u32) {
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
    pub(super) fn wild_address(&mut self) {
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

    pub(super) fn memory(&mut self) {
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
    pub(super) fn global_access(&mut self) {
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
    pub(super) fn atomic(&mut self) {
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
    pub(super) fn generic_access(&mut self) {
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

    /// This thread's two shared words (maybe through a generic address, or both read as a run
    /// through one base: the sandbox fences such a run once), or wild indices.
    pub(super) fn shared_access(&mut self) {
        let d = self.data();
        self.line("mov.u64 %a1, sh;");
        let mut pair = true;
        if self.mode == Mode::Hostile && self.rng.chance(60) {
            let r = self.data();
            emit!(self, "cvt.u64.u32 %a2, {r};");
        } else {
            self.line("mul.wide.u32 %a2, %r0, 8;");
            if self.rng.chance(50) {
                self.line("add.s64 %a2, %a2, 4;");
                pair = false;
            }
        }
        self.line("add.s64 %a1, %a1, %a2;");
        if pair && self.rng.chance(30) {
            let (g, d2) = (self.guard(), self.data());
            emit!(self, "{g}ld.shared.u32 {d}, [%a1];");
            emit!(self, "{g}ld.shared.u32 {d2}, [%a1+4];");
            return;
        }
        self.window_word("shared", &d);
    }

    /// A local word by a masked index (maybe through a generic address), or a wild index.
    pub(super) fn local_access(&mut self) {
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
        self.window_word("local", &d);
    }

    /// A word of `space` at `%a1` loaded into or stored from `d`, under a random guard, maybe
    /// through its generic address.
    fn window_word(&mut self, space: &str, d: &str) {
        let g = self.guard();
        let store = self.rng.chance(50);
        let sp = if self.rng.chance(30) {
            emit!(self, "cvta.{space}.u64 %a1, %a1;");
            String::new()
        } else {
            format!(".{space}")
        };
        if store {
            emit!(self, "{g}st{sp}.u32 [%a1], {d};");
        } else {
            emit!(self, "{g}ld{sp}.u32 {d}, [%a1];");
        }
    }

    /// Reads another thread's shared words between two barriers (uniform code only).
    pub(super) fn barrier_exchange(&mut self) {
        let (d, r) = (self.data(), self.data());
        self.line("bar.sync 0;");
        self.read_shared_word(&d, &r);
        self.line("bar.sync 0;");
    }

    /// `d` := the first shared word of thread `r` mod [`THREADS`] (of this block).
    fn read_shared_word(&mut self, d: &str, r: &str) {
        emit!(self, "and.b32 %t1, {r}, {};", THREADS - 1);
        self.line("mul.wide.u32 %a2, %t1, 8;");
        self.line("mov.u64 %a1, sh;");
        self.line("add.s64 %a1, %a1, %a2;");
        emit!(self, "ld.shared.u32 {d}, [%a1];");
    }

    /// Reads an 8×8 matrix of 16-bit elements from shared rows with `ldmatrix` between two
    /// barriers (uniform code only: the whole warp runs it). Lanes 0–7 name the rows, 16 bytes
    /// each: legal, a row of `sh` chosen by the data; hostile, `sh` plus the raw data (outside
    /// the window, and misaligned: the sandbox moves the row and reports it).
    pub(super) fn matrix_exchange(&mut self) {
        let (d, r) = (self.data(), self.data());
        self.line("bar.sync 0;");
        match self.mode {
            Mode::Legal => {
                emit!(self, "and.b32 %t1, {r}, {};", SHARED / 16 - 1);
                self.line("mul.wide.u32 %a2, %t1, 16;");
            }
            Mode::Hostile => emit!(self, "cvt.u64.u32 %a2, {r};"),
        }
        self.line("mov.u64 %a1, sh;");
        self.line("add.s64 %a1, %a1, %a2;");
        emit!(
            self,
            "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {{{d}}}, [%a1];"
        );
        self.line("bar.sync 0;");
    }

    /// An exchange through `mbarrier` (uniform code only: every thread of the block arrives).
    /// Legal: thread 0 initialises `mb` for the block's arrivals (each thread's 1, or 2 for the
    /// first warp's), all arrive and spin until the phase completes, read another thread's
    /// shared words, and meet at a barrier before anyone initialises `mb` again. Hostile: one
    /// thread's barrier is `mb` plus raw data, the raw argument (generic), or `mb` holding a
    /// word of garbage; it is arrived on past its count and waited on once.
    pub(super) fn mbarrier_exchange(&mut self) {
        let (d, r) = (self.data(), self.data());
        if self.mode == Mode::Hostile {
            self.line("bar.sync 0;");
            let sp = match self.rng.below(3) {
                0 => {
                    emit!(self, "cvt.u64.u32 %a2, {r};");
                    self.line("mov.u64 %a1, mb;");
                    self.line("add.s64 %a1, %a1, %a2;");
                    ".shared"
                }
                1 => {
                    self.line("mov.u64 %a1, %rd2;");
                    ""
                }
                _ => {
                    emit!(self, "cvt.u64.u32 %a2, {r};");
                    self.line("mov.u64 %a1, mb;");
                    self.line("st.shared.u64 [%a1], %a2;");
                    ".shared"
                }
            };
            if self.rng.chance(50) {
                emit!(
                    self,
                    "mbarrier.init{sp}.b64 [%a1], {};",
                    1 + self.rng.below(4)
                );
            }
            emit!(
                self,
                "mbarrier.arrive{sp}.b64 %ms, [%a1], {};",
                1 + self.rng.below(8)
            );
            emit!(self, "mbarrier.arrive_drop{sp}.b64 %ms, [%a1];");
            if self.rng.chance(50) {
                emit!(self, "cp.async.mbarrier.arrive.noinc{sp}.b64 [%a1];");
            }
            if self.rng.chance(50) {
                emit!(self, "mbarrier.test_wait{sp}.b64 %mq, [%a1], %ms;");
            } else {
                emit!(self, "mbarrier.try_wait.parity{sp}.b64 %mq, [%a1], {r};");
            }
            emit!(self, "selp.u32 {d}, 1, 2, %mq;");
            emit!(self, "mbarrier.inval{sp}.b64 [%a1];");
            self.line("bar.sync 0;");
            return;
        }
        // The first warp arrives with 2 apiece in half the exchanges.
        let twice = self.rng.chance(50);
        let expected = if twice { THREADS + 32 } else { THREADS };
        self.line("setp.eq.u32 %mq, %r0, 0;");
        emit!(self, "@%mq mbarrier.init.shared.b64 [mb], {expected};");
        self.line("bar.sync 0;");
        if twice {
            self.line("setp.lt.u32 %mq, %r0, 32;");
            self.line("selp.u32 %t1, 2, 1, %mq;");
            self.line("mbarrier.arrive.shared.b64 %ms, [mb], %t1;");
        } else {
            self.line("mbarrier.arrive.shared.b64 %ms, [mb];");
        }
        let spin = self.label();
        let _ = writeln!(self.out, "{spin}:");
        match self.rng.below(3) {
            0 => self.line("mbarrier.try_wait.parity.shared.b64 %mq, [mb], 0;"),
            1 => self.line("mbarrier.try_wait.shared.b64 %mq, [mb], %ms;"),
            _ => self.line("mbarrier.test_wait.shared.b64 %mq, [mb], %ms;"),
        }
        emit!(self, "@!%mq bra {spin};");
        self.read_shared_word(&d, &r);
        self.line("bar.sync 0;");
    }

    /// This thread's `gw` word (read, written, or updated atomically), a table word by a
    /// masked index or at a fixed offset, or (hostile) a table word far out of range.
    pub(super) fn global_var_access(&mut self) {
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
}
