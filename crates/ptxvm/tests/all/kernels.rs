//! Clang-generated fixture kernels against CPU references.

use crate::harness::{Arg, DevMem, Rng, Shape, fixture, run};

#[test]
fn vector_add_matches_cpu() {
    let m = fixture();
    let mut rng = Rng::new(1);
    let n = 1000;
    let (a, b) = (rng.vec_f32(n, 100.0), rng.vec_f32(n, 100.0));
    let mut mem = DevMem::new();
    let (da, db, dc) = (mem.upload(&a), mem.upload(&b), mem.alloc(n * 4));
    let stats = run(
        &m,
        "vadd",
        &Shape::linear(4, 256),
        &[Arg::Ptr(da), Arg::Ptr(db), Arg::Ptr(dc), Arg::I32(n as i32)],
        &mem,
    )
    .unwrap();
    let c: Vec<f32> = mem.download(dc, n);
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
    assert!(stats.lane_instructions > n as u64 * 5);
}

#[test]
fn saxpy_matches_cpu_including_partial_last_block() {
    let m = fixture();
    let mut rng = Rng::new(2);
    let n = 777;
    let (x, y) = (rng.vec_f32(n, 10.0), rng.vec_f32(n, 10.0));
    let mut mem = DevMem::new();
    let (dx, dy) = (mem.upload(&x), mem.upload(&y));
    let alpha = 2.5f32;
    run(
        &m,
        "saxpy",
        &Shape::linear(7, 128),
        &[
            Arg::F32(alpha),
            Arg::Ptr(dx),
            Arg::Ptr(dy),
            Arg::I32(n as i32),
        ],
        &mem,
    )
    .unwrap();
    let out: Vec<f32> = mem.download(dy, n);
    for i in 0..n {
        assert_eq!(out[i], alpha.mul_add(x[i], y[i]), "element {i}");
    }
}
