//! Cases for the memory spaces beyond global: dynamic shared, constant and initialised module
//! globals, and per-thread local arrays.

use crate::case::{BufferSpec, Case, blocks_for, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;
use crate::stream::LaunchShape;

/// Grid-stride f64 sums through dynamic shared memory (128 threads × 8 bytes), 7 blocks.
/// Inputs are multiples of 2⁻²³ in [-1, 1], so every partial sum is exact in f64 whatever the
/// order: the comparison is exact.
pub fn reduce_f64_dynamic(rng: &mut Rng) -> Case {
    let (n, grid, block) = (30_000usize, 7usize, 128usize);
    let x: Vec<f32> = rng.vec(n, |r| r.range_f32(-1.0, 1.0));
    let mut sums = vec![0f64; grid];
    for (i, v) in x.iter().enumerate() {
        sums[(i / block) % grid] += f64::from(*v);
    }
    Case::buffers_then_n(
        LaunchShape {
            grid: [grid as u32, 1, 1],
            block: [block as u32, 1, 1],
            shared_bytes: (block * 8) as u32,
        },
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output(
                "partial",
                Expect::F64 {
                    want: sums,
                    tol: Tolerance::EXACT,
                },
            ),
        ],
        n,
    )
}

/// The `__device__ float bias[4]` initialiser in const_poly.cu.
const BIAS: [f32; 4] = [0.5, -1.25, 2.0, 0.0];

/// Horner evaluation with `__constant__` coefficients written by the host, plus an initialised
/// `__device__` array. Seven multiply-adds (possibly fused) of values ≤ ~20: 2e-4 absolute,
/// 1e-5 relative.
pub fn const_poly(rng: &mut Rng) -> Case {
    let n = 3_001;
    let coeffs: Vec<f32> = rng.vec(8, |r| r.range_f32(-1.0, 1.0));
    let x: Vec<f32> = rng.vec(n, |r| r.range_f32(-1.5, 1.5));
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let v = f64::from(*v);
            let p = coeffs
                .iter()
                .rev()
                .fold(0f64, |acc, c| acc * v + f64::from(*c));
            (p + f64::from(BIAS[i & 3])) as f32
        })
        .collect();
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 128), 128),
        vec![
            BufferSpec::input("x", bytes_of(&x)),
            BufferSpec::output(
                "y",
                Expect::F32 {
                    want,
                    tol: Tolerance {
                        abs: 2e-4,
                        rel: 1e-5,
                    },
                },
            ),
        ],
        n,
    )
    .with_global("coeffs", bytes_of(&coeffs))
}

/// Each thread insertion-sorts 16 ints in a local array; exact.
pub fn local_sort(rng: &mut Rng) -> Case {
    let n = 500;
    let x: Vec<i32> = rng.vec(16 * n, |r| r.range_i32(-1000, 1000));
    let mut want = x.clone();
    for chunk in want.chunks_mut(16) {
        chunk.sort_unstable();
    }
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 64), 64),
        vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("out", Expect::I32(want)),
        ],
        n,
    )
}
