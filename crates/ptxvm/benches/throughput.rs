//! Interpreter throughput: lane-instructions per second on one core for saxpy, a shared-memory
//! reduction and a tiled matmul (the test fixtures). Run with `cargo bench -p ptxvm`.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use ptxvm::{Launch, Memory, Module};

#[path = "../tests/all/launch.rs"]
mod launch;
use launch::launch;

/// Heap-backed device memory: one allocation per buffer, addresses are host addresses. Atomic
/// words, so the VM's writes through `&self` alias no plain reference.
struct Heap(Vec<Box<[AtomicU64]>>);

// SAFETY: the pointer is derived from one boxed slice and covers [addr, addr + len) inside it
// (checked); the boxes live as long as the `Heap`, which every launch borrows; their words are
// atomics, so no plain Rust reference aliases the VM's writes.
unsafe impl Memory for Heap {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        self.0.iter().find_map(|b| {
            let base = b.as_ptr() as u64;
            let off = addr.checked_sub(base)?;
            (off.checked_add(len)? <= 8 * b.len() as u64).then(|| {
                b.as_ptr()
                    .cast::<u8>()
                    .wrapping_add(off as usize)
                    .cast_mut()
            })
        })
    }
}

impl Heap {
    fn alloc(&mut self, bytes: usize, fill: u64) -> u64 {
        let b: Box<[AtomicU64]> = (0..bytes.div_ceil(8))
            .map(|_| AtomicU64::new(fill))
            .collect();
        let a = b.as_ptr() as u64;
        self.0.push(b);
        a
    }
}

fn params(m: &Module, k: usize, vals: &[u64]) -> Vec<u8> {
    let info = &m.kernels()[k];
    let mut p = vec![0u8; 64];
    for (pi, v) in info.params.iter().zip(vals) {
        p[pi.offset as usize..][..pi.size as usize]
            .copy_from_slice(&v.to_le_bytes()[..pi.size as usize]);
    }
    p
}

/// CPU time this thread has run, in seconds (Linux schedstat), so that a busy machine does not
/// distort per-core throughput; `None` elsewhere, and wall-clock time is used instead.
fn thread_cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

fn bench(m: &Module, name: &str, grid: [u32; 3], block: [u32; 3], vals: &[u64], mem: &Heap) {
    let k = m.kernel_index(name).expect("fixture kernel");
    let p = params(m, k, vals);
    let l = Launch {
        grid,
        block,
        ..launch(k, &p)
    };
    ptxvm::launch(m, &l, mem).expect("warm-up launch");
    let (mut lanes, mut warps) = (0u64, 0u64);
    let t = Instant::now();
    let cpu0 = thread_cpu_secs();
    let mut runs = 0;
    while t.elapsed().as_secs_f64() < 2.0 {
        let s = ptxvm::launch(m, &l, mem).expect("launch");
        lanes += s.lane_instructions;
        warps += s.warp_instructions;
        runs += 1;
    }
    let secs = match (cpu0, thread_cpu_secs()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => t.elapsed().as_secs_f64(),
    };
    println!(
        "{name:<10} {runs:>5} launches  {:>8.1} M lane-instr/s/core  {:>7.2} M warp-instr/s  ({:.1} lanes/instr)",
        lanes as f64 / secs / 1e6,
        warps as f64 / secs / 1e6,
        lanes as f64 / warps as f64
    );
}

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let text =
        std::fs::read_to_string(format!("{dir}/tests/fixtures/kernels.ptx")).expect("fixture PTX");
    let m = Module::load(&text).expect("fixture loads");
    let mut mem = Heap(Vec::new());
    let n = 1 << 16;
    let one = u64::from(1f32.to_bits()) | (u64::from(1f32.to_bits()) << 32);
    let (x, y) = (mem.alloc(n * 4, one), mem.alloc(n * 4, one));
    bench(
        &m,
        "saxpy",
        [(n / 256) as u32, 1, 1],
        [256, 1, 1],
        &[u64::from(2f32.to_bits()), x, y, n as u64],
        &mem,
    );
    let out = mem.alloc(n / 256 * 4, 0);
    bench(
        &m,
        "block_sum",
        [(n / 256) as u32, 1, 1],
        [256, 1, 1],
        &[x, out, n as u64],
        &mem,
    );
    let dim = 128usize;
    let (a, b, c) = (
        mem.alloc(dim * dim * 4, one),
        mem.alloc(dim * dim * 4, one),
        mem.alloc(dim * dim * 4, 0),
    );
    let g = (dim / 16) as u32;
    bench(
        &m,
        "matmul",
        [g, g, 1],
        [16, 16, 1],
        &[a, b, c, dim as u64],
        &mem,
    );
}
