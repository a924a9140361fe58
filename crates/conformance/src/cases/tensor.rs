//! Cases for the tensor-core kernels (`corpus/mma_gemm.cu`): `mma.sync.aligned` products whose
//! fragments are loaded by the PTX ISA's layouts, so a layout that differs between ptxvm and an
//! NVIDIA GPU shows as wrong elements, not as rounding.

use half::{bf16, f16};

use crate::case::{ArgSpec, BufferSpec, Case, bytes_of};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;
use crate::stream::LaunchShape;

/// Tiles of 16×`tile_n`, one per warp, four warps a block: `(M, N)` gives the grid.
fn tiles_shape(m: usize, n: usize, tile_n: usize) -> LaunchShape {
    tiles_of(m, n, (16, tile_n))
}

/// Tiles of `tile_m`×`tile_n`, one per warp, four warps a block.
fn tiles_of(m: usize, n: usize, (tile_m, tile_n): (usize, usize)) -> LaunchShape {
    let warps = (m / tile_m) * (n / tile_n);
    LaunchShape {
        grid: [warps.div_ceil(4) as u32, 1, 1],
        block: [128, 1, 1],
        shared_bytes: 0,
    }
}

/// `A, Bt, C, M, N, K`: the three buffers, then the sizes.
fn gemm_args(m: usize, n: usize, k: usize) -> Vec<ArgSpec> {
    let mut args = vec![ArgSpec::Buffer(0), ArgSpec::Buffer(1), ArgSpec::Buffer(2)];
    args.extend([m, n, k].map(|x| ArgSpec::I32(x as i32)));
    args
}

/// C = A·B with f16 A and B, f32 accumulators (`mma_gemm_f16`, and `mma_gemm_f16_smem`, which
/// stages the tiles in shared memory and loads them with ldmatrix). The products are exact in f32; tensor cores sum
/// them with their own partial-sum rounding, which stays within a few f32 ulps of the exact
/// sum (|sum| ≤ 64 here), far inside the tolerance.
pub fn mma_gemm_f16(rng: &mut Rng) -> Case {
    f16_gemm(rng, (48, 40, 64), 8)
}

/// The same with nvcuda::wmma's instructions (`mma_gemm_wmma`): 16×16 tiles, so N = 32.
pub fn mma_gemm_wmma(rng: &mut Rng) -> Case {
    f16_gemm(rng, (48, 32, 64), 16)
}

/// C = A·B of f16 `(M, N, K)` into f32, one 16×`tile_n` tile a warp.
fn f16_gemm(rng: &mut Rng, (m, n, k): (usize, usize, usize), tile_n: usize) -> Case {
    let a: Vec<f16> = rng.vec(m * k, |r| f16::from_f32(r.range_f32(-1.0, 1.0)));
    let bt: Vec<f16> = rng.vec(n * k, |r| f16::from_f32(r.range_f32(-1.0, 1.0)));
    let mut c = vec![0f32; m * n];
    for row in 0..m {
        for col in 0..n {
            let dot: f64 = (0..k)
                .map(|x| f64::from(a[row * k + x].to_f32()) * f64::from(bt[col * k + x].to_f32()))
                .sum();
            c[row * n + col] = dot as f32;
        }
    }
    let bits = |v: &[f16]| bytes_of(&v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>());
    Case {
        shape: tiles_shape(m, n, tile_n),
        buffers: vec![
            BufferSpec::input("A", bits(&a)),
            BufferSpec::input("Bt", bits(&bt)),
            BufferSpec::output(
                "C",
                Expect::F32 {
                    want: c,
                    tol: Tolerance {
                        abs: 1e-4,
                        rel: 1e-4,
                    },
                },
            ),
        ],
        args: gemm_args(m, n, k),
        globals: Vec::new(),
    }
}

/// C = A·B with s8 A and u8 B into s32: integer tensor-core products are exact, so equal.
pub fn mma_gemm_s8(rng: &mut Rng) -> Case {
    let (m, n, k) = (32usize, 24usize, 96usize);
    let a: Vec<i8> = rng.vec(m * k, |r| r.next_u32() as i8);
    let bt: Vec<u8> = rng.vec(n * k, |r| r.next_u32() as u8);
    let mut c = vec![0i32; m * n];
    for row in 0..m {
        for col in 0..n {
            c[row * n + col] = (0..k)
                .map(|x| i32::from(a[row * k + x]) * i32::from(bt[col * k + x]))
                .sum();
        }
    }
    Case {
        shape: tiles_shape(m, n, 8),
        buffers: vec![
            BufferSpec::input("A", a.iter().map(|v| *v as u8).collect()),
            BufferSpec::input("Bt", bt),
            BufferSpec::output("C", Expect::I32(c)),
        ],
        args: gemm_args(m, n, k),
        globals: Vec::new(),
    }
}

/// `C[row][col] = Σ A[row][x]·Bt[col][x]` in f64 over `values` of A and Bt (row-major A, B
/// transposed).
fn product(a: &[f64], bt: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    (0..m * n)
        .map(|i| {
            let (row, col) = (i / n, i % n);
            (0..k).map(|x| a[row * k + x] * bt[col * k + x]).sum()
        })
        .collect()
}

/// f32 results within a few ulps of sums of at most ~100 (tensor cores round partial sums).
const NEAR: Tolerance = Tolerance {
    abs: 1e-4,
    rel: 1e-4,
};

/// A GEMM case of `dims` in tiles of `tile`: A, Bt (bytes), and what C must hold.
fn gemm_case(
    dims: (usize, usize, usize),
    tile: (usize, usize),
    a: Vec<u8>,
    bt: Vec<u8>,
    c: Expect,
) -> Case {
    let (m, n, k) = dims;
    Case {
        shape: tiles_of(m, n, tile),
        buffers: vec![
            BufferSpec::input("A", a),
            BufferSpec::input("Bt", bt),
            BufferSpec::output("C", c),
        ],
        args: gemm_args(m, n, k),
        globals: Vec::new(),
    }
}

/// f32 results of exact products within a few ulps ([`NEAR`]).
fn near(want: &[f64]) -> Expect {
    Expect::F32 {
        want: want.iter().map(|v| *v as f32).collect(),
        tol: NEAR,
    }
}

/// C = A·B with bf16 A and B into f32 (`mma_gemm_wmma_bf16`): bf16 products are exact in f32.
pub fn mma_gemm_wmma_bf16(rng: &mut Rng) -> Case {
    let dims = (32, 48, 64);
    let (m, n, k) = dims;
    let a: Vec<bf16> = rng.vec(m * k, |r| bf16::from_f32(r.range_f32(-1.0, 1.0)));
    let bt: Vec<bf16> = rng.vec(n * k, |r| bf16::from_f32(r.range_f32(-1.0, 1.0)));
    let wide = |v: &[bf16]| v.iter().map(|h| f64::from(h.to_f32())).collect::<Vec<_>>();
    let want = product(&wide(&a), &wide(&bt), dims);
    let bits = |v: &[bf16]| bytes_of(&v.iter().map(|h| h.to_bits()).collect::<Vec<u16>>());
    gemm_case(dims, (16, 16), bits(&a), bits(&bt), near(&want))
}

/// C = A·B with s8 A and B into s32 (`mma_gemm_wmma_s8`): exact, so equal.
pub fn mma_gemm_wmma_s8(rng: &mut Rng) -> Case {
    let dims = (48, 32, 96);
    let (m, n, k) = dims;
    let a: Vec<i8> = rng.vec(m * k, |r| r.next_u32() as i8);
    let bt: Vec<i8> = rng.vec(n * k, |r| r.next_u32() as i8);
    let wide = |v: &[i8]| v.iter().map(|x| f64::from(*x)).collect::<Vec<_>>();
    let want = product(&wide(&a), &wide(&bt), dims);
    let raw = |v: &[i8]| v.iter().map(|x| *x as u8).collect::<Vec<u8>>();
    let c = Expect::I32(want.iter().map(|v| *v as i32).collect());
    gemm_case(dims, (16, 16), raw(&a), raw(&bt), c)
}

/// C = A·B with tf32 A and B into f32 (`mma_gemm_wmma_tf32`), from f32 values tf32 holds
/// exactly (multiples of 1/64 below 1), so the products are exact.
pub fn mma_gemm_wmma_tf32(rng: &mut Rng) -> Case {
    let dims = (32, 32, 40);
    let (m, n, k) = dims;
    let value = |r: &mut Rng| r.range_i32(-64, 64) as f32 / 64.0;
    let a: Vec<f32> = rng.vec(m * k, value);
    let bt: Vec<f32> = rng.vec(n * k, value);
    let wide = |v: &[f32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<_>>();
    let want = product(&wide(&a), &wide(&bt), dims);
    gemm_case(dims, (16, 16), bytes_of(&a), bytes_of(&bt), near(&want))
}

/// C = A·B in f64 (`mma_gemm_wmma_f64`, m8n8k4 tiles): within f64 rounding of the exact sum.
pub fn mma_gemm_wmma_f64(rng: &mut Rng) -> Case {
    let dims = (24, 16, 20);
    let (m, n, k) = dims;
    let a: Vec<f64> = rng.vec(m * k, |r| f64::from(r.range_f32(-1.0, 1.0)));
    let bt: Vec<f64> = rng.vec(n * k, |r| f64::from(r.range_f32(-1.0, 1.0)));
    let c = Expect::F64 {
        want: product(&a, &bt, dims),
        tol: Tolerance {
            abs: 1e-12,
            rel: 1e-12,
        },
    };
    gemm_case(dims, (8, 8), bytes_of(&a), bytes_of(&bt), c)
}
