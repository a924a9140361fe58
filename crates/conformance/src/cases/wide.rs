//! Cases for f64 and 64-bit integer arithmetic, the approximate f32 math instructions, and
//! warp votes with a CAS loop.

use crate::case::{ArgSpec, BufferSpec, Case, blocks_for, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;

/// A double spread over many magnitudes (never zero, never NaN).
fn wide_f64(r: &mut Rng) -> f64 {
    let mantissa = f64::from(r.range_f32(1.0, 2.0)) + f64::from(r.next_u32()) * 2f64.powi(-56);
    let exponent = r.range_i32(-60, 60);
    let sign = if r.next_u32() & 1 == 0 { 1.0 } else { -1.0 };
    sign * mantissa * 2f64.powi(exponent)
}

/// add/mul/div/sqrt/fma in f64 are correctly rounded (IEEE 754) on both sides: compared as bits.
pub fn f64_math(rng: &mut Rng) -> Case {
    let n = 2_049;
    let a: Vec<f64> = rng.vec(n, wide_f64);
    let b: Vec<f64> = rng.vec(n, wide_f64);
    let want: Vec<u64> = a
        .iter()
        .zip(&b)
        .flat_map(|(x, y)| [x + y, x * y, x / y, x.abs().sqrt(), x.mul_add(*y, 1.0)])
        .map(f64::to_bits)
        .collect();
    Case::a_b_to_out(n, bytes_of(&a), bytes_of(&b), Expect::U64(want))
}

/// mul.lo/mul.hi/div/rem/popc/arithmetic shift on 64-bit integers; exact.
pub fn u64_math(rng: &mut Rng) -> Case {
    let n = 2_049;
    let a: Vec<u64> = rng.vec(n, |r| {
        if r.next_u32() % 8 == 0 {
            u64::MAX - u64::from(r.next_u32())
        } else {
            r.next_u64()
        }
    });
    let b: Vec<u64> = rng.vec(n, |r| r.next_u64() >> r.range_u32(0, 64));
    let want: Vec<u64> = a
        .iter()
        .zip(&b)
        .flat_map(|(&x, &y)| {
            let d = y | 1;
            [
                x.wrapping_mul(y),
                ((u128::from(x) * u128::from(y)) >> 64) as u64,
                x / d,
                x % d,
                u64::from(x.count_ones()),
                ((x as i64) >> (y & 63)) as u64,
            ]
        })
        .collect();
    Case::a_b_to_out(n, bytes_of(&a), bytes_of(&b), Expect::U64(want))
}

/// The approximate instructions on x in [-π, π], against f64 references, within the bounds the
/// PTX ISA documents, doubled: sin/cos 2⁻²⁰·⁹ absolute → 2e-6; ex2 2 ulp → 1e-6 relative;
/// lg2 2⁻²²·⁶ absolute → 1e-6; rsqrt 2⁻²²·⁹ relative → 1e-6; tanh 2⁻¹¹ relative → 1e-3.
pub fn approx_f32(rng: &mut Rng) -> Case {
    let n = 3_003;
    let pi = std::f32::consts::PI;
    let x: Vec<f32> = rng.vec(n, |r| r.range_f32(-pi, pi));
    let xs: Vec<f64> = x.iter().map(|v| f64::from(*v)).collect();
    let map = |f: fn(f64) -> f64| xs.iter().map(|v| f(*v) as f32).collect::<Vec<f32>>();
    let out = |name, want, abs, rel| {
        BufferSpec::output(
            name,
            Expect::F32 {
                want,
                tol: Tolerance { abs, rel },
            },
        )
    };
    Case::buffers_then_n(
        shape_1d(blocks_for(n, 256), 256),
        vec![
            BufferSpec::input("x", bytes_of(&x)),
            out("sin", map(f64::sin), 2e-6, 0.0),
            out("cos", map(f64::cos), 2e-6, 0.0),
            out("ex2", map(f64::exp2), 0.0, 1e-6),
            out("lg2", map(|v| (v.abs() + 1.0).log2()), 1e-6, 0.0),
            out("rsqrt", map(|v| 1.0 / (v.abs() + 1.0).sqrt()), 0.0, 1e-6),
            out("tanh", map(f64::tanh), 1e-6, 1e-3),
        ],
        n,
    )
}

/// Per-warp value ranges chosen so any/all come out both true and false across warps.
fn vote_input(warp: usize, r: &mut Rng) -> i32 {
    match warp % 4 {
        0 => r.range_i32(-999, 999),
        1 => r.range_i32(-2000, 0),
        2 => r.range_i32(-2000, 2000),
        _ => r.range_i32(1, 2000),
    }
}

/// ballot/any/all/shfl.up over full warps (a partial last warp acts on x = 0) and a CAS-loop max.
pub fn warp_vote(rng: &mut Rng) -> Case {
    let (n, block) = (1_000usize, 128usize);
    let grid = n.div_ceil(block);
    let x: Vec<i32> = (0..n).map(|i| vote_input(i / 32, rng)).collect();
    let padded: Vec<i32> = (0..grid * block)
        .map(|i| if i < n { x[i] } else { 0 })
        .collect();
    let mut want = Vec::with_capacity(4 * n);
    for i in 0..n {
        let base = i - i % 32;
        let warp = &padded[base..base + 32];
        let ballot = warp
            .iter()
            .enumerate()
            .fold(0u32, |acc, (l, v)| acc | (((v & 1) as u32) << l));
        let any = warp.iter().any(|v| *v > 0);
        let all = warp.iter().all(|v| *v > -1000);
        let up = if i % 32 == 0 { x[i] } else { padded[i - 1] };
        want.extend([ballot, u32::from(any), u32::from(all), up as u32]);
    }
    let max = x.iter().copied().max().unwrap_or(i32::MIN);
    Case {
        shape: shape_1d(grid as u32, block as u32),
        buffers: vec![
            BufferSpec::input("in", bytes_of(&x)),
            BufferSpec::output("out", Expect::U32(want)),
            BufferSpec::in_out("max_out", bytes_of(&[i32::MIN]), Expect::I32(vec![max])),
        ],
        args: vec![
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::Buffer(2),
            ArgSpec::I32(n as i32),
        ],
        globals: Vec::new(),
    }
}
