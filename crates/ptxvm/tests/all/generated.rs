//! Generated kernels against the sandbox on ptxvm (the programs: testkit's `ptxgen`).
//!
//! - A *legal* program touches only its own buffers, in bounds and aligned. Rewritten, it must
//!   give the original's bytes exactly, in the kernel and in its skip copy, under several poll
//!   intervals, with nothing reported as fenced.
//! - A *hostile* program forms addresses from a raw `u64` argument (another tenant's buffer,
//!   the control block, 0, unmapped space), huge and misaligned offsets, and out-of-range
//!   shared and local indices, and some of its loops never end. Rewritten, it must never fault,
//!   never touch the victim, stop when the host changes the abort epoch, and leave the control
//!   block as the host set it but for the words kernels may report in.
//!
//! Each runs again in a variant with `ldmatrix` of shared rows in uniform code (testkit's
//! `program_with_matrix`; hostile rows at raw addresses), and in one with count-down loops,
//! as nvcc rotates counted loops (`program_with_countdown`; loop versioning copies them when
//! their entry check proves them short, and a hostile one may never meet its bound), and in one
//! with `mbarrier` exchanges (`program_with_mbarrier`; hostile barriers at raw addresses and on
//! words of garbage).
//!
//! Each case is named by its seed; a failure prints it with the program. `SANDBOX_GEN_CASES`
//! runs more cases than CI's default (and `SANDBOX_GEN_SEED` starts from another seed), e.g.
//! `SANDBOX_GEN_CASES=20000 cargo test --release -p ptxvm --test all generated`.

use std::sync::atomic::Ordering;

use ptxvm::Module;
use ptxvm::sandbox::{GlobalsLayout, LAUNCH_SKIPS_ENTRY_READ, Policy, sandbox};
use testkit::ptxgen::{
    self, BLOCKS, Mode, Rng, THREADS, differences, program, program_with_countdown,
    program_with_matrix, program_with_mbarrier,
};

use super::harness::{Arg, pack};
use super::sandbox::{ARENA, FAULT, GuestMem, Hidden, Shape, run_sandboxed_flagged};

/// The epoch the host publishes in these tests.
const EPOCH: u32 = 5;
/// How long a hostile case runs before the host stops it (a new epoch).
const STOP_AFTER: std::time::Duration = std::time::Duration::from_millis(40);

/// Runs `name` of `m` (a rewritten module) on the test's arguments, with the module's globals
/// block at `globals`; the launch may skip the entry read when `skips`.
fn run(
    m: &Module,
    name: &str,
    args: &[Arg],
    mem: &GuestMem,
    skips: bool,
    globals: u64,
) -> Result<(), String> {
    let hidden = Hidden {
        globals,
        epoch: EPOCH,
    };
    let flags = if skips { LAUNCH_SKIPS_ENTRY_READ } else { 0 };
    let shape = Shape::linear(BLOCKS, THREADS);
    run_sandboxed_flagged(
        m,
        name,
        shape,
        args,
        &hidden,
        mem,
        (mem.base(), ARENA as u64),
        flags,
    )
    .map(|_| ())
    .map_err(|f| format!("{name}: {f}"))
}

/// Fresh memory with the case's input; returns it with `out` and the kernel arguments.
fn setup(seed: u64, wild: impl FnOnce(&GuestMem) -> u64) -> (GuestMem, u64, Vec<Arg>) {
    let mut mem = GuestMem::new();
    let out = mem.alloc(ptxgen::out_bytes());
    let inp = mem.alloc(ptxgen::input_bytes());
    let (input, s) = ptxgen::inputs(seed);
    mem.write(inp, &input);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let w = wild(&mem);
    let args = vec![Arg::U64(out), Arg::U64(inp), Arg::U64(w), Arg::U32(s)];
    (mem, out, args)
}

/// The original module's variables, one arena allocation each from its initialiser (what the
/// driver's module loader does); their addresses in the module's order.
fn original_globals(mem: &mut GuestMem, m: &Module) -> Vec<u64> {
    m.globals()
        .iter()
        .map(|g| {
            let a = mem.alloc(g.size as usize);
            mem.write(a, &g.init);
            a
        })
        .collect()
}

/// The rewritten module's globals block, from its layout's initial image (as gpuhost-wasm
/// lays it out for each Store); 0 when it has none.
fn globals_block(mem: &mut GuestMem, layout: &GlobalsLayout) -> u64 {
    if layout.size == 0 {
        return 0;
    }
    assert!(layout.align <= 256, "the test arena aligns to 256");
    let at = mem.alloc(layout.size as usize);
    mem.write(at, &layout.init);
    at
}

/// The control block holds what the host wrote (the epoch) and, at most, the launch's tag in
/// the words kernels report in.
fn assert_control_block_intact(mem: &GuestMem, epoch: u32) {
    assert_eq!(
        mem.ctl_word(0).load(Ordering::SeqCst),
        epoch,
        "the epoch word changed"
    );
    for off in (4..64).step_by(4) {
        assert_eq!(
            mem.ctl_word(off).load(Ordering::SeqCst),
            0,
            "control word {off} changed"
        );
    }
    for off in (FAULT + 8..FAULT + 64).step_by(4) {
        assert_eq!(
            mem.ctl_word(off).load(Ordering::SeqCst),
            0,
            "control word {off} changed"
        );
    }
}

/// The policy a case of `seed` is rewritten under, and its generator for later choices.
pub fn policy_for(seed: u64, mode: Mode) -> (Policy, Rng) {
    let (poll_interval, rng) = ptxgen::case_choices(seed, mode);
    let policy = Policy {
        poll_interval,
        ..Policy::default()
    };
    (policy, rng)
}

/// One legal case: the original's bytes, then the rewritten kernel's and its skip copy's.
fn legal_case(seed: u64) -> Result<(), String> {
    legal_of(seed, &program(seed, Mode::Legal))
}

/// A legal case whose program has tensor-core reads too.
fn legal_matrix_case(seed: u64) -> Result<(), String> {
    legal_of(seed, &program_with_matrix(seed, Mode::Legal))
}

/// A legal case of `seed`'s inputs and policy for the program `text`.
fn legal_of(seed: u64, text: &str) -> Result<(), String> {
    let orig = Module::load(text).map_err(|e| format!("the generated program loads: {e}"))?;
    let (policy, _) = policy_for(seed, Mode::Legal);
    let s = sandbox(text, &policy).map_err(|e| format!("sandbox: {e}"))?;
    super::sandbox::assert_uncounted_copies_never_poll(&s);
    let sbx = Module::load(&s.ptx).map_err(|e| format!("rewritten PTX loads: {e}\n{}", s.ptx))?;
    let out_bytes = ptxgen::out_bytes();

    let (mut mem, out, args) = setup(seed, |_| 0);
    let gaddrs = original_globals(&mut mem, &orig);
    let k = orig.kernel_index("gen").ok_or("no kernel")?;
    let params = pack(&orig.kernels()[k], &args);
    let l = ptxvm::Launch {
        grid: [BLOCKS, 1, 1],
        block: [THREADS, 1, 1],
        globals: &gaddrs,
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_secs(60)),
        ..crate::launch::launch(k, &params)
    };
    ptxvm::launch(&orig, &l, &mem).map_err(|f| format!("the original faulted: {f}"))?;
    let want = mem.read(out, out_bytes);

    let mut runs = vec![("gen".to_string(), false)];
    if let Some(copy) = &s.kernels[0].skip_copy {
        runs.push((copy.clone(), true));
    }
    for (name, skips) in runs {
        let (mut mem, out, args) = setup(seed, |_| 0);
        let block = globals_block(&mut mem, &s.globals);
        run(&sbx, &name, &args, &mem, skips, block)?;
        let got = mem.read(out, out_bytes);
        if got != want {
            return Err(format!(
                "{name} (poll interval {}): out differs: {}",
                policy.poll_interval,
                differences(&want, &got)
            ));
        }
        let fault = mem.ctl_word(FAULT).load(Ordering::SeqCst);
        if fault != 0 {
            return Err(format!(
                "{name}: a legal program was reported fenced ({fault:#x})"
            ));
        }
        assert_control_block_intact(&mem, EPOCH);
        mem.assert_victim_safe();
    }
    Ok(())
}

/// One hostile case: the rewritten kernel (and its skip copy) never faults, never touches the
/// victim, and leaves the control block intact. A kernel still running after [`STOP_AFTER`]
/// (one of its loops may never end) is stopped as the host stops a guest, by a new epoch, and
/// must then end (the launch's deadline fails the case if it does not).
fn hostile_case(seed: u64) -> Result<(), String> {
    hostile_of(seed, &program(seed, Mode::Hostile))
}

/// A hostile case whose program has tensor-core reads too (at raw addresses).
fn hostile_matrix_case(seed: u64) -> Result<(), String> {
    hostile_of(seed, &program_with_matrix(seed, Mode::Hostile))
}

/// A hostile case of `seed`'s inputs and policy for the program `text`.
fn hostile_of(seed: u64, text: &str) -> Result<(), String> {
    Module::load(text).map_err(|e| format!("the generated program loads: {e}"))?;
    let (policy, mut rng) = policy_for(seed, Mode::Hostile);
    let s = sandbox(text, &policy).map_err(|e| format!("sandbox: {e}"))?;
    super::sandbox::assert_uncounted_copies_never_poll(&s);
    let sbx = Module::load(&s.ptx).map_err(|e| format!("rewritten PTX loads: {e}\n{}", s.ptx))?;
    let mut runs = vec![("gen".to_string(), false)];
    if let Some(copy) = &s.kernels[0].skip_copy {
        runs.push((copy.clone(), true));
    }
    for (name, skips) in runs {
        let (mut mem, _, args) = setup(seed, |m| {
            ptxgen::wild(&mut rng, m.victim(), (m.base(), ARENA as u64), m.ctl())
        });
        let block = globals_block(&mut mem, &s.globals);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let ran = std::thread::scope(|scope| {
            let mem = &mem;
            scope.spawn(move || {
                if wait.recv_timeout(STOP_AFTER).is_err() {
                    mem.ctl_word(0).store(EPOCH + 1, Ordering::SeqCst);
                }
            });
            let ran = run(&sbx, &name, &args, mem, skips, block);
            let _ = done.send(());
            ran
        });
        ran?;
        let epoch = mem.ctl_word(0).load(Ordering::SeqCst);
        assert_control_block_intact(&mem, epoch.clamp(EPOCH, EPOCH + 1));
        mem.assert_victim_safe();
    }
    Ok(())
}

/// Cases to run, and the first seed: CI's default, or the environment's.
fn cases(default: u64) -> (u64, u64) {
    let n = std::env::var("SANDBOX_GEN_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    let first = std::env::var("SANDBOX_GEN_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    (first, n)
}

/// Runs `case` for each seed; a failure names its seed and prints its program.
fn each_seed(
    default: u64,
    mode: Mode,
    write: fn(u64, Mode) -> String,
    case: fn(u64) -> Result<(), String>,
) {
    let (first, n) = cases(default);
    for seed in first..first + n {
        let outcome = std::panic::catch_unwind(|| case(seed));
        let failure = match outcome {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into()),
        };
        panic!(
            "{mode:?} case seed {seed} failed: {failure}\n--- program ---\n{}",
            write(seed, mode)
        );
    }
}

#[test]
fn generated_legal_kernels_give_the_originals_results_rewritten() {
    each_seed(150, Mode::Legal, program, legal_case);
}

#[test]
fn generated_legal_kernels_with_ldmatrix_give_the_originals_results_rewritten() {
    each_seed(60, Mode::Legal, program_with_matrix, legal_matrix_case);
}

#[test]
fn generated_hostile_kernels_stay_in_their_arena_rewritten() {
    each_seed(150, Mode::Hostile, program, hostile_case);
}

#[test]
fn generated_hostile_kernels_with_ldmatrix_stay_in_their_arena_rewritten() {
    each_seed(60, Mode::Hostile, program_with_matrix, hostile_matrix_case);
}

#[test]
fn generated_legal_kernels_with_countdown_loops_give_the_originals_results_rewritten() {
    each_seed(60, Mode::Legal, program_with_countdown, |seed| {
        legal_of(seed, &program_with_countdown(seed, Mode::Legal))
    });
}

#[test]
fn generated_hostile_kernels_with_countdown_loops_stay_in_their_arena_and_stop_rewritten() {
    each_seed(60, Mode::Hostile, program_with_countdown, |seed| {
        hostile_of(seed, &program_with_countdown(seed, Mode::Hostile))
    });
}

#[test]
fn generated_legal_kernels_with_mbarrier_give_the_originals_results_rewritten() {
    each_seed(60, Mode::Legal, program_with_mbarrier, |seed| {
        legal_of(seed, &program_with_mbarrier(seed, Mode::Legal))
    });
}

#[test]
fn generated_hostile_kernels_with_mbarrier_stay_in_their_arena_and_stop_rewritten() {
    each_seed(60, Mode::Hostile, program_with_mbarrier, |seed| {
        hostile_of(seed, &program_with_mbarrier(seed, Mode::Hostile))
    });
}
