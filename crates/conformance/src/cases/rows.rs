//! Cases for the row-wise kernels (softmax, layer norm) and the atomic histogram.

use crate::case::{ArgSpec, BufferSpec, Case, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;

/// Row-wise softmax, 37 rows × 300 columns (not a multiple of the 128-thread block), inputs in
/// [-8, 8]. `__expf` is ex2.approx (≈2 ulp) on a scaled argument: 1e-4 relative, 1e-6 absolute.
pub fn softmax_rows(rng: &mut Rng) -> Case {
    let (rows, cols) = (37usize, 300usize);
    let x: Vec<f32> = rng.vec(rows * cols, |r| r.range_f32(-8.0, 8.0));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let m = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, v| m.max(f64::from(*v)));
        let e: Vec<f64> = row.iter().map(|v| (f64::from(*v) - m).exp()).collect();
        let s: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| (v / s) as f32));
    }
    Case {
        shape: shape_1d(rows as u32, 128),
        buffers: vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output(
                "out",
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 1e-6,
                        rel: 1e-4,
                    },
                },
            ),
        ],
        args: vec![
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::I32(rows as i32),
            ArgSpec::I32(cols as i32),
        ],
        globals: Vec::new(),
    }
}

/// Layer norm, 19 rows × 257 columns, eps 1e-5, x in [-3, 3], gamma in [0.5, 1.5], beta in
/// [-1, 1]. rsqrt.approx (≈2⁻²² relative) and float sums: 1e-4 absolute + 1e-4 relative.
pub fn layer_norm(rng: &mut Rng) -> Case {
    let (rows, cols, eps) = (19usize, 257usize, 1e-5f32);
    let x: Vec<f32> = rng.vec(rows * cols, |r| r.range_f32(-3.0, 3.0));
    let gamma: Vec<f32> = rng.vec(cols, |r| r.range_f32(0.5, 1.5));
    let beta: Vec<f32> = rng.vec(cols, |r| r.range_f32(-1.0, 1.0));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let mean = row.iter().map(|v| f64::from(*v)).sum::<f64>() / cols as f64;
        let var = row
            .iter()
            .map(|v| (f64::from(*v) - mean).powi(2))
            .sum::<f64>()
            / cols as f64;
        let inv = 1.0 / (var + f64::from(eps)).sqrt();
        for (c, v) in row.iter().enumerate() {
            want.push(
                ((f64::from(*v) - mean) * inv * f64::from(gamma[c]) + f64::from(beta[c])) as f32,
            );
        }
    }
    Case {
        shape: shape_1d(rows as u32, 128),
        buffers: vec![
            BufferSpec::input("x", bytes_of(&x)),
            BufferSpec::input("gamma", bytes_of(&gamma)),
            BufferSpec::input("beta", bytes_of(&beta)),
            BufferSpec::output(
                "y",
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 1e-4,
                        rel: 1e-4,
                    },
                },
            ),
        ],
        args: vec![
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::Buffer(2),
            ArgSpec::Buffer(3),
            ArgSpec::I32(rows as i32),
            ArgSpec::I32(cols as i32),
            ArgSpec::F32(eps),
        ],
        globals: Vec::new(),
    }
}

/// 256-bin histogram of 50,000 values, half of them crowded into 8 bins (heavy atomic
/// contention). `bins` starts with random counts, so the result proves accumulation; exact.
pub fn histogram(rng: &mut Rng) -> Case {
    let n = 50_000;
    let data: Vec<u32> = rng.vec(n, |r| {
        let v = r.next_u32();
        if v & 1 == 0 { (v >> 8) & 7 } else { v }
    });
    let start: Vec<u32> = rng.vec(256, |r| r.range_u32(0, 1000));
    let mut want = start.clone();
    for v in &data {
        want[(*v & 255) as usize] += 1;
    }
    Case {
        shape: shape_1d(16, 256),
        buffers: vec![
            BufferSpec::input("data", bytes_of(&data)),
            BufferSpec::in_out("bins", bytes_of(&start), Expect::U32(want)),
        ],
        args: vec![
            ArgSpec::Buffer(0),
            ArgSpec::I32(n as i32),
            ArgSpec::Buffer(1),
        ],
        globals: Vec::new(),
    }
}
