//! How long the PTX sandbox takes to rewrite a module (issue #9's goal: at most 1 ms per 100 KB
//! of PTX): `cargo run --release -p ptxvm --example rewrite_time -- FILE.ptx|DIR...`. Each module
//! is rewritten once to warm up, then 21 times; the median is reported per module and for all of
//! them together, in ms per 100 KB of input. CPU only: no driver is opened.

use std::path::{Path, PathBuf};
use std::time::Instant;

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
    let (mut bytes, mut ms) = (0usize, 0f64);
    println!("| module | KB | rewrite ms (median of {ROUNDS}) | ms per 100 KB |");
    println!("|---|---:|---:|---:|");
    for f in &files {
        let Ok(ptx) = std::fs::read_to_string(f) else {
            eprintln!("{}: unreadable", f.display());
            continue;
        };
        if ptxvm::sandbox::sandbox(&ptx, &policy).is_err() {
            eprintln!("{}: refused by the sandbox, not timed", f.display());
            continue;
        }
        let mut times: Vec<f64> = (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                let _ = std::hint::black_box(ptxvm::sandbox::sandbox(&ptx, &policy));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[ROUNDS / 2];
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
        files.len(),
        ms / kb * 100.0
    );
}
