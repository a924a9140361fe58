//! Rewrite time of the PTX sandbox, in milliseconds per 100 KB of PTX: every corpus module
//! (clang and nvcc) and one large synthetic module (one nvcc kernel repeated under new names).
//! Run with `cargo bench -p ptxvm --bench sandbox` (the goal: ≤ 1 ms per 100 KB).

use std::path::Path;
use std::time::{Duration, Instant};

use ptxvm::sandbox::{Policy, sandbox};

/// Mean seconds of one rewrite of `text`, over at least `min` of wall time.
fn time(text: &str, min: Duration) -> f64 {
    let policy = Policy::default();
    let (mut n, start) = (0u32, Instant::now());
    while n < 3 || start.elapsed() < min {
        let s = sandbox(text, &policy).expect("the corpus rewrites");
        std::hint::black_box(s);
        n += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(n)
}

fn per_100kb(secs: f64, bytes: usize) -> f64 {
    secs * 1e3 * 100_000.0 / bytes as f64
}

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&dir).join("../../corpus");
    let mut files = Vec::new();
    for flavour in ["clang", "nvcc"] {
        if let Ok(rd) = std::fs::read_dir(root.join(flavour)) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "ptx") {
                    files.push(e.path());
                }
            }
        }
    }
    files.sort();
    let (mut total_bytes, mut total_secs) = (0usize, 0f64);
    for f in &files {
        let text = std::fs::read_to_string(f).expect("corpus file");
        let secs = time(&text, Duration::from_millis(100));
        total_bytes += text.len();
        total_secs += secs;
        println!(
            "{:<40} {:>7} B  {:>8.1} µs  {:>6.3} ms/100KB",
            f.strip_prefix(&root).unwrap_or(f).display(),
            text.len(),
            secs * 1e6,
            per_100kb(secs, text.len())
        );
    }
    println!(
        "corpus total: {total_bytes} B in {:.1} µs = {:.3} ms per 100 KB",
        total_secs * 1e6,
        per_100kb(total_secs, total_bytes)
    );

    // A large module: softmax_rows (nvcc) repeated under 60 names, about 350 KB.
    let base = std::fs::read_to_string(root.join("nvcc/softmax_rows.ptx"))
        .or_else(|_| std::fs::read_to_string(root.join("clang/softmax_rows.ptx")))
        .expect("softmax_rows.ptx");
    // Everything after the `.address_size` line is repeated.
    let body_at = base
        .find(".address_size")
        .and_then(|i| base[i..].find('\n').map(|j| i + j + 1))
        .unwrap_or(0);
    let (head, body) = base.split_at(body_at);
    let mut big = head.to_string();
    for k in 0..60 {
        big.push_str(&body.replace("softmax_rows", &format!("softmax_rows_{k}")));
    }
    let secs = time(&big, Duration::from_millis(500));
    println!(
        "synthetic {} B: {:.1} µs = {:.3} ms per 100 KB",
        big.len(),
        secs * 1e6,
        per_100kb(secs, big.len())
    );
}
