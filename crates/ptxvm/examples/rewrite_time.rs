//! How long the PTX sandbox takes to rewrite a module (issue #9's goal: at most 1 ms per 100 KB
//! of PTX): `cargo run --release -p ptxvm --example rewrite_time -- FILE.ptx|DIR...`. Each module
//! is rewritten once to warm up, then 21 times in rounds over all modules; the median is
//! reported per module and, summed, for all of them together, in ms per 100 KB of input. CPU
//! only: no driver is opened. It allocates through jemalloc, as the `gpuhost` binary does (where
//! `gpuhost run` and `serve` rewrite their guests' modules). Under glibc's malloc the figure
//! followed the heap's trimming, not the code: one build took 1.53 ms per 100 KB idle and 2.15
//! beside a compile, a faster build 1.92 (80 `brk` calls a run); under jemalloc each stayed
//! within 2% (bench/RESULTS.md, session 32).

use std::path::{Path, PathBuf};
use std::time::Instant;

/// The `gpuhost` binary's allocator (crates/gpuhost-cli/src/malloc.rs).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const ROUNDS: usize = 21;

fn main() {
    let mut files: Vec<PathBuf> = Vec::new();
    for a in std::env::args().skip(1) {
        let p = Path::new(&a);
        match std::fs::read_dir(p) {
            Ok(rd) => files.extend(
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|f| f.extension().is_some_and(|x| x == "ptx")),
            ),
            Err(_) => files.push(p.to_path_buf()),
        }
    }
    files.sort();
    if files.is_empty() {
        eprintln!("usage: rewrite_time FILE.ptx|DIR...");
        std::process::exit(2);
    }
    let policy = ptxvm::sandbox::Policy::default();
    // Read and rewritten once each (the warm-up); refused or unreadable modules are left out.
    let mut modules: Vec<(&PathBuf, String)> = Vec::new();
    for f in &files {
        let Ok(ptx) = std::fs::read_to_string(f) else {
            eprintln!("{}: unreadable", f.display());
            continue;
        };
        if ptxvm::sandbox::sandbox(&ptx, &policy).is_err() {
            eprintln!("{}: refused by the sandbox, not timed", f.display());
            continue;
        }
        modules.push((f, ptx));
    }
    // Round-robin: each round rewrites every module once, so a slow spell of a shared machine
    // (the GPU machine's CPU varied 1.6x between two back-to-back runs) falls on all modules
    // alike instead of on the few timed during it.
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); modules.len()];
    for _ in 0..ROUNDS {
        for ((_, ptx), t) in modules.iter().zip(&mut times) {
            let start = Instant::now();
            let _ = std::hint::black_box(ptxvm::sandbox::sandbox(ptx, &policy));
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let (mut bytes, mut ms) = (0usize, 0f64);
    println!("| module | KB | rewrite ms (median of {ROUNDS}) | ms per 100 KB |");
    println!("|---|---:|---:|---:|");
    for ((f, ptx), mut t) in modules.iter().zip(times) {
        t.sort_by(f64::total_cmp);
        let median = t[ROUNDS / 2];
        let kb = ptx.len() as f64 / 1024.0;
        println!(
            "| {} | {kb:.1} | {median:.3} | {:.3} |",
            f.display(),
            median / kb * 100.0
        );
        bytes += ptx.len();
        ms += median;
    }
    let kb = bytes as f64 / 1024.0;
    println!(
        "\nall {} modules: {kb:.1} KB in {ms:.2} ms, {:.3} ms per 100 KB (goal <= 1)",
        modules.len(),
        ms / kb * 100.0
    );
}
