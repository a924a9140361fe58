//! Cases for elementwise, reduction, scan, matrix multiply and transpose kernels.

use crate::case::{ArgSpec, BufferSpec, Case, blocks_for, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;
use crate::stream::LaunchShape;

fn uniform(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    rng.vec(n, |r| r.range_f32(lo, hi))
}

/// c = a + b: f32 addition is correctly rounded on both sides, so exact.
pub fn vector_add(rng: &mut Rng) -> Case {
    let n = 10_007;
    let a = uniform(rng, n, -100.0, 100.0);
    let b = uniform(rng, n, -100.0, 100.0);
    let c: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 256), 256),
        vec![
            BufferSpec::input("a", bytes_of(&a)),
            BufferSpec::input("b", bytes_of(&b)),
            BufferSpec::output(
                "c",
                Expect::F32 {
                    want: c,
                    tol: Tolerance::EXACT,
                },
            ),
        ],
        n,
    )
}

/// y = a·x + y on a grid smaller than n (grid-stride loop). The compiler may or may not fuse
/// into fma: 1e-6 absolute + 1e-6 relative covers both roundings for |values| ≤ 4.
pub fn saxpy(rng: &mut Rng) -> Case {
    let n = 10_007;
    let a = rng.range_f32(-2.0, 2.0);
    let x = uniform(rng, n, -1.0, 1.0);
    let y = uniform(rng, n, -2.0, 2.0);
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| (f64::from(a) * f64::from(*x) + f64::from(*y)) as f32)
        .collect();
    Case {
        shape: shape_1d(8, 128),
        buffers: vec![
            BufferSpec::input("x", bytes_of(&x)),
            BufferSpec::in_out(
                "y",
                bytes_of(&y),
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 1e-6,
                        rel: 1e-6,
                    },
                },
            ),
        ],
        args: vec![
            ArgSpec::I32(n as i32),
            ArgSpec::F32(a),
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
        ],
        globals: Vec::new(),
    }
}

/// Per-block sums of 512 values in [-1, 1]: tree order differs from the f64 reference by at
/// most ~9·2⁻²⁴·Σ|x| ≈ 1.4e-4, so 1e-3 absolute.
pub fn reduce_shared(rng: &mut Rng) -> Case {
    let n = 5_000;
    let x = uniform(rng, n, -1.0, 1.0);
    let want: Vec<f32> = x
        .chunks(512)
        .map(|c| c.iter().map(|v| f64::from(*v)).sum::<f64>() as f32)
        .collect();
    Case::buffers_then_n(
        shape_1d(want.len() as u32, 256),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output(
                "partial",
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 1e-3,
                        rel: 1e-5,
                    },
                },
            ),
        ],
        n,
    )
}

/// Grid-stride sums then shuffles, 6 blocks × 192 threads (6 warps: warp 0 also reduces fewer
/// than 32 warp sums). Each block sums ~3,300 values in [-1, 1]; 5e-3 absolute.
pub fn reduce_warp(rng: &mut Rng) -> Case {
    let (n, grid, block) = (20_000usize, 6usize, 192usize);
    let x = uniform(rng, n, -1.0, 1.0);
    let mut sums = vec![0f64; grid];
    for (i, v) in x.iter().enumerate() {
        sums[(i / block) % grid] += f64::from(*v);
    }
    let want: Vec<f32> = sums.into_iter().map(|s| s as f32).collect();
    Case::buffers_then_n(
        shape_1d(grid as u32, block as u32),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output(
                "partial",
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 5e-3,
                        rel: 1e-5,
                    },
                },
            ),
        ],
        n,
    )
}

/// Inclusive scan within each 256-element segment; integers, exact.
pub fn scan_block(rng: &mut Rng) -> Case {
    let n = 1_000;
    let x: Vec<i32> = rng.vec(n, |r| r.range_i32(-1000, 1000));
    let mut want = Vec::with_capacity(n);
    for seg in x.chunks(256) {
        let mut acc = 0i32;
        for v in seg {
            acc = acc.wrapping_add(*v);
            want.push(acc);
        }
    }
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 256), 256),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("out", Expect::I32(want)),
        ],
        n,
    )
}

/// C = A·B with sizes that are not multiples of 16. Dot products of 37 terms in [-1, 1]:
/// 2e-4 absolute + 1e-4 relative.
pub fn matmul_tiled(rng: &mut Rng) -> Case {
    let (m, n, k) = (45usize, 70usize, 37usize);
    let a = uniform(rng, m * k, -1.0, 1.0);
    let b = uniform(rng, k * n, -1.0, 1.0);
    let mut c = vec![0f32; m * n];
    for row in 0..m {
        for col in 0..n {
            let dot: f64 = (0..k)
                .map(|i| f64::from(a[row * k + i]) * f64::from(b[i * n + col]))
                .sum();
            c[row * n + col] = dot as f32;
        }
    }
    Case {
        shape: LaunchShape {
            grid: [blocks_for(n, 16), blocks_for(m, 16), 1],
            block: [16, 16, 1],
            shared_bytes: 0,
        },
        buffers: vec![
            BufferSpec::input("A", bytes_of(&a)),
            BufferSpec::input("B", bytes_of(&b)),
            BufferSpec::output(
                "C",
                Expect::F32 {
                    want: c,
                    tol: Tolerance {
                        abs: 2e-4,
                        rel: 1e-4,
                    },
                },
            ),
        ],
        args: vec![
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::Buffer(2),
            ArgSpec::I32(m as i32),
            ArgSpec::I32(n as i32),
            ArgSpec::I32(k as i32),
        ],
        globals: Vec::new(),
    }
}

/// out = inᵀ for a 70×45 matrix (partial tiles on both edges); a move, so exact.
pub fn transpose(rng: &mut Rng) -> Case {
    let (rows, cols) = (70usize, 45usize);
    let x = uniform(rng, rows * cols, -1e6, 1e6);
    let mut t = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    Case {
        shape: LaunchShape {
            grid: [blocks_for(cols, 32), blocks_for(rows, 32), 1],
            block: [32, 8, 1],
            shared_bytes: 0,
        },
        buffers: vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output(
                "out",
                Expect::F32 {
                    want: t,
                    tol: Tolerance::EXACT,
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

/// oob_write with an in-range index: exactly one element becomes 1.0, the rest keep their
/// random starting values (this buffer is in/out, so it is not poisoned).
pub fn oob_write_in_range(rng: &mut Rng) -> Case {
    let n = 64;
    let start = uniform(rng, n, 2.0, 3.0);
    let index = rng.range_u32(0, n as u32) as usize;
    let mut want = start.clone();
    want[index] = 1.0;
    Case {
        shape: shape_1d(1, 32),
        buffers: vec![BufferSpec::in_out(
            "p",
            bytes_of(&start),
            Expect::F32 {
                want,
                tol: Tolerance::EXACT,
            },
        )],
        args: vec![ArgSpec::Buffer(0), ArgSpec::U64(index as u64)],
        globals: Vec::new(),
    }
}
