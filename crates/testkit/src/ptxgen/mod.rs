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

mod control;
mod frame;
mod memory;

use frame::Gen;

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

/// [`program`] with tensor-core reads too: `ldmatrix` of shared rows in uniform code (a
/// hostile program's rows at raw addresses).
pub fn program_with_matrix(seed: u64, mode: Mode) -> String {
    let mut g = Gen::new(seed, mode, true);
    g.matrix = true;
    g.module()
}

/// [`program`] with count-down loops among its loops too (the back-edge taken while the counter
/// differs from its bound, as nvcc rotates counted loops; loop versioning copies them when an
/// entry check proves them short). A hostile program's may never meet their bound.
pub fn program_with_countdown(seed: u64, mode: Mode) -> String {
    let mut g = Gen::new(seed, mode, true);
    g.countdown = true;
    g.module()
}

/// [`program`] with `mbarrier` exchanges too: in uniform code, the block's threads arrive on a
/// shared barrier thread 0 initialised and wait for its phase (by parity or by state, spinning
/// in `try_wait` or `test_wait`) before reading another thread's shared words. A hostile
/// program's barriers are at `mb` plus raw data, at its raw argument (a generic address), or on
/// a word of garbage it stored, arrived on past their counts and waited on once.
pub fn program_with_mbarrier(seed: u64, mode: Mode) -> String {
    let mut g = Gen::new(seed, mode, true);
    g.mbarrier = true;
    g.module()
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

/// The poll interval a case of `seed` is rewritten under (the default 1,024, or 1 or 4, which
/// poll on nearly every back-edge), and the case's generator for its later choices ([`wild`]).
pub fn case_choices(seed: u64, mode: Mode) -> (u32, Rng) {
    let salt = match mode {
        Mode::Legal => 0xa076_1d64_78bd_642f,
        Mode::Hostile => 0xe703_7ed1_a0b4_28db,
    };
    let mut rng = Rng((seed ^ salt) | 1);
    (rng.pick(&[1024, 1, 4]), rng)
}

/// Where a hostile case points its raw argument: into another tenant's allocation (`victim`)
/// or just outside it, just outside the arena (`arena`, `arena_len` bytes), at the control
/// block (`ctl`), at 0, at unmapped space, or anywhere.
pub fn wild(rng: &mut Rng, victim: u64, (arena, arena_len): (u64, u64), ctl: u64) -> u64 {
    match rng.below(9) {
        0 => victim,
        1 => victim + 16,
        2 => victim.wrapping_sub(8),
        3 => arena.wrapping_sub(16),
        4 => arena + arena_len - 4,
        5 => ctl,
        6 => 0,
        7 => 0xdead_0000_0000,
        _ => rng.bits(),
    }
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
    use super::{Mode, program, program_with_matrix, program_with_mbarrier};

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
            "brx.idx %t0",
            "rem.u32 %t0",
        ] {
            assert!(all.contains(needle), "no generated program has {needle}");
        }
    }

    #[test]
    fn tensor_core_reads_come_only_when_asked_for_and_leave_the_rest_of_the_program_alone() {
        let with: Vec<String> = (1..60)
            .map(|s| program_with_matrix(s, Mode::Hostile))
            .collect();
        assert!(
            with.iter()
                .any(|p| p.contains("ldmatrix.sync.aligned.m8n8.x1.shared.b16"))
        );
        assert!((1..60).all(|s| !program(s, Mode::Legal).contains("ldmatrix")));
        // A program with no barrier exchange draws nothing for them: the same as without.
        let same =
            (1..60).filter(|&s| program_with_matrix(s, Mode::Legal) == program(s, Mode::Legal));
        assert!(same.count() > 0);
    }

    #[test]
    fn mbarrier_exchanges_come_only_when_asked_for_and_leave_the_rest_of_the_program_alone() {
        for mode in [Mode::Legal, Mode::Hostile] {
            let with: Vec<String> = (1..60).map(|s| program_with_mbarrier(s, mode)).collect();
            assert!(
                with.iter().any(|p| p.contains("mbarrier.arrive")),
                "{mode:?}"
            );
            assert!((1..60).all(|s| !program(s, mode).contains("mbarrier")));
        }
        // Each hostile form, and each legal wait, is written somewhere.
        let all: String = (1..200)
            .flat_map(|s| [Mode::Legal, Mode::Hostile].map(|m| program_with_mbarrier(s, m)))
            .collect();
        for needle in [
            "mbarrier.try_wait.parity.shared.b64 %mq, [mb], 0;",
            "mbarrier.try_wait.shared.b64 %mq, [mb], %ms;",
            "mbarrier.test_wait.shared.b64 %mq, [mb], %ms;",
            "mbarrier.arrive.shared.b64 %ms, [mb], %t1;",
            "mov.u64 %a1, %rd2;",
            "mbarrier.arrive.b64 %ms, [%a1]",
            "st.shared.u64 [%a1], %a2;",
            "cp.async.mbarrier.arrive.noinc.shared.b64 [%a1];",
        ] {
            assert!(all.contains(needle), "no generated program has {needle}");
        }
        // A program with no mbarrier exchange draws nothing for them: the same as without,
        // but for the barrier's declarations.
        let bare = |p: String| -> String {
            p.lines()
                .filter(|l| !l.contains("%ms;") && !l.contains("%mq;") && !l.contains(" mb;"))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let same = (1..60).filter(|&s| {
            bare(program_with_mbarrier(s, Mode::Legal)) == bare(program(s, Mode::Legal))
        });
        assert!(same.count() > 0);
    }

    #[test]
    fn a_seed_always_gives_the_same_program() {
        assert_eq!(program(7, Mode::Hostile), program(7, Mode::Hostile));
        assert_ne!(program(7, Mode::Legal), program(8, Mode::Legal));
    }
}
