//! Cases for asynchronous-copy pipelines: tiles staged in shared memory by `cp.async`, their
//! hand-off between warps synchronised by `mbarrier`.

use crate::case::{ArgSpec, BufferSpec, Case, bytes_of, shape_1d};
use crate::compare::{Expect, Tolerance};
use crate::rng::Rng;

/// Elements a tile of mbarrier_pipeline.cu (its `PIPE_TILE`).
const TILE: usize = 512;

/// y[i] = a·x[i] + x[m], m the mirror of i in its tile (0 past n), streamed through a 4-stage
/// ring by one producer warp and four consumer warps, as CUTLASS's warp-specialised mainloops
/// split a block. 20 tiles over 2 blocks: each block runs 10, going round the ring more than
/// twice, and the last tile ends one element into a 16-byte copy (n = 4k + 1), which zero-fills
/// the rest. (The case first had two consumer warps, when a failed wait spun out ptxvm's whole
/// time slice: 3.5 s a run with four, debug build; a failed wait now ends the slice.)
/// |a·x| ≤ 2 and |x[m]| ≤ 1, and the compiler may or may not fuse into fma: 1e-6 absolute +
/// 1e-6 relative covers both roundings.
pub fn mbarrier_pipeline(rng: &mut Rng) -> Case {
    let (n, grid, block) = (10_001usize, 2, 160);
    let a = rng.range_f32(-2.0, 2.0);
    let x: Vec<f32> = rng.vec(n, |r| r.range_f32(-1.0, 1.0));
    let want: Vec<f32> = (0..n)
        .map(|i| {
            let m = i / TILE * TILE + (TILE - 1 - i % TILE);
            let mirror = x.get(m).copied().unwrap_or(0.0);
            (f64::from(a) * f64::from(x[i]) + f64::from(mirror)) as f32
        })
        .collect();
    Case {
        shape: shape_1d(grid, block),
        buffers: vec![
            BufferSpec::input("x", bytes_of(&x)),
            BufferSpec::output(
                "y",
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
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::F32(a),
            ArgSpec::I32(n as i32),
        ],
        globals: Vec::new(),
    }
}
