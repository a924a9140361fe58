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

#[test]
fn shared_memory_block_sum_with_barriers() {
    let m = fixture();
    let mut rng = Rng::new(3);
    let n = 1000;
    let input: Vec<i32> = (0..n)
        .map(|_| (rng.next_u32() % 1000) as i32 - 500)
        .collect();
    let mut mem = DevMem::new();
    let (din, dout) = (mem.upload(&input), mem.alloc(4 * 4));
    run(
        &m,
        "block_sum",
        &Shape::linear(4, 256),
        &[Arg::Ptr(din), Arg::Ptr(dout), Arg::I32(n)],
        &mem,
    )
    .unwrap();
    let out: Vec<i32> = mem.download(dout, 4);
    for (b, got) in out.iter().enumerate() {
        let want: i32 = input.iter().skip(b * 256).take(256).sum();
        assert_eq!(*got, want, "block {b}");
    }
}

#[test]
fn warp_shuffle_reduction_sums_each_warp() {
    let m = fixture();
    let mut rng = Rng::new(4);
    let n = 256;
    let input: Vec<i32> = (0..n).map(|_| (rng.next_u32() % 100) as i32).collect();
    let mut mem = DevMem::new();
    let (din, dout) = (mem.upload(&input), mem.alloc(n / 32 * 4));
    run(
        &m,
        "warp_sum",
        &Shape::linear(2, 128),
        &[Arg::Ptr(din), Arg::Ptr(dout)],
        &mem,
    )
    .unwrap();
    let out: Vec<i32> = mem.download(dout, n / 32);
    for w in 0..n / 32 {
        assert_eq!(
            out[w],
            input[w * 32..][..32].iter().sum::<i32>(),
            "warp {w}"
        );
    }
}

#[test]
fn divergent_loops_reconverge_with_correct_results() {
    let m = fixture();
    let mut rng = Rng::new(5);
    let n = 300;
    let input: Vec<u32> = (0..n).map(|_| rng.next_u32() % 10_000 + 1).collect();
    let mut mem = DevMem::new();
    let (din, dout) = (mem.upload(&input), mem.alloc(n * 4));
    run(
        &m,
        "collatz",
        &Shape::linear(3, 128),
        &[Arg::Ptr(din), Arg::Ptr(dout), Arg::I32(n as i32)],
        &mem,
    )
    .unwrap();
    let out: Vec<u32> = mem.download(dout, n);
    for i in 0..n {
        let (mut x, mut s) = (input[i], 0u32);
        while x > 1 && s < 1000 {
            x = if x & 1 == 1 { 3 * x + 1 } else { x >> 1 };
            s += 1;
        }
        assert_eq!(out[i], s, "input {}", input[i]);
    }
}

#[test]
fn atomic_histogram_counts_every_element_across_workers() {
    let m = fixture();
    let mut rng = Rng::new(6);
    let n = 5000;
    let input: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
    let mut mem = DevMem::new();
    let (din, dbins) = (mem.upload(&input), mem.alloc(64 * 4));
    let mut shape = Shape::linear(20, 256);
    shape.workers = 4;
    run(
        &m,
        "histogram",
        &shape,
        &[Arg::Ptr(din), Arg::Ptr(dbins), Arg::I32(n)],
        &mem,
    )
    .unwrap();
    let bins: Vec<u32> = mem.download(dbins, 64);
    let mut want = [0u32; 64];
    for &b in &input {
        want[(b & 63) as usize] += 1;
    }
    assert_eq!(bins, want.to_vec());
}

#[test]
fn f16_conversion_rounds_to_nearest_even() {
    let m = fixture();
    let mut rng = Rng::new(7);
    let n = 256;
    let mut input = rng.vec_f32(n, 70_000.0);
    input[0] = 1.0 + 1.0 / 2048.0; // tie → 1.0
    input[1] = 65_520.0; // overflows to inf
    input[2] = 1e-8; // underflows to 0
    let mut mem = DevMem::new();
    let (din, dh, db) = (mem.upload(&input), mem.alloc(n * 2), mem.alloc(n * 4));
    run(
        &m,
        "to_half",
        &Shape::linear(1, 256),
        &[
            Arg::Ptr(din),
            Arg::Ptr(dh),
            Arg::Ptr(db),
            Arg::I32(n as i32),
        ],
        &mem,
    )
    .unwrap();
    let h: Vec<u16> = mem.download(dh, n);
    let back: Vec<f32> = mem.download(db, n);
    assert_eq!(&h[..3], &[0x3c00, 0x7c00, 0]);
    for i in 0..n {
        let x = input[i];
        if x.abs() >= 65_520.0 {
            assert!(back[i].is_infinite());
            continue;
        }
        // The nearest half is within half a unit in the last place (2^-11 relative, or
        // 2^-25 absolute for subnormals).
        let tol = (x.abs() * 2f32.powi(-11)).max(2f32.powi(-25));
        assert!(
            (back[i] - x).abs() <= tol,
            "{x} -> {:#x} -> {}",
            h[i],
            back[i]
        );
    }
}

#[test]
fn device_function_call_passes_params_and_result() {
    let m = fixture();
    let mut rng = Rng::new(8);
    let n = 100;
    let x = rng.vec_f32(n, 4.0);
    let mut mem = DevMem::new();
    let (dx, dy) = (mem.upload(&x), mem.alloc(n * 4));
    run(
        &m,
        "call_poly",
        &Shape::linear(1, 128),
        &[Arg::Ptr(dx), Arg::Ptr(dy), Arg::I32(n as i32)],
        &mem,
    )
    .unwrap();
    let y: Vec<f32> = mem.download(dy, n);
    for i in 0..n {
        let want = (3.0f32 * x[i]).mul_add(x[i], 1.0);
        let alt = 3.0f32 * x[i] * x[i] + 1.0;
        assert!(y[i] == want || y[i] == alt, "{} -> {}", x[i], y[i]);
    }
}

#[test]
fn tiled_matmul_matches_cpu() {
    let m = fixture();
    let mut rng = Rng::new(9);
    let n = 48;
    let (a, b) = (rng.vec_f32(n * n, 1.0), rng.vec_f32(n * n, 1.0));
    let mut mem = DevMem::new();
    let (da, db, dc) = (mem.upload(&a), mem.upload(&b), mem.alloc(n * n * 4));
    let shape = Shape {
        grid: [3, 3, 1],
        block: [16, 16, 1],
        dyn_shared: 0,
        workers: 2,
    };
    run(
        &m,
        "matmul",
        &shape,
        &[Arg::Ptr(da), Arg::Ptr(db), Arg::Ptr(dc), Arg::I32(n as i32)],
        &mem,
    )
    .unwrap();
    let c: Vec<f32> = mem.download(dc, n * n);
    for r in 0..n {
        for col in 0..n {
            let want: f32 = (0..n).map(|k| a[r * n + k] * b[k * n + col]).sum();
            assert!((c[r * n + col] - want).abs() < 1e-4, "({r},{col})");
        }
    }
}

#[test]
fn dynamic_shared_memory_reverses_each_block() {
    let m = fixture();
    let data: Vec<i32> = (0..512).collect();
    let mut mem = DevMem::new();
    let d = mem.upload(&data);
    let shape = Shape {
        grid: [4, 1, 1],
        block: [128, 1, 1],
        dyn_shared: 512,
        workers: 2,
    };
    run(&m, "reverse_dyn", &shape, &[Arg::Ptr(d)], &mem).unwrap();
    let out: Vec<i32> = mem.download(d, 512);
    for b in 0..4 {
        for t in 0..128 {
            assert_eq!(out[b * 128 + t], (b * 128 + 127 - t) as i32);
        }
    }
}

#[test]
fn ballot_collects_predicate_bits_per_warp() {
    let m = fixture();
    let mut rng = Rng::new(10);
    let input: Vec<i32> = (0..128).map(|_| rng.next_u32() as i32).collect();
    let mut mem = DevMem::new();
    let (din, dout) = (mem.upload(&input), mem.alloc(16));
    run(
        &m,
        "ballot",
        &Shape::linear(1, 128),
        &[Arg::Ptr(din), Arg::Ptr(dout)],
        &mem,
    )
    .unwrap();
    let out: Vec<u32> = mem.download(dout, 4);
    for w in 0..4 {
        let want = (0..32).fold(0u32, |acc, l| acc | (u32::from(input[w * 32 + l] > 0) << l));
        assert_eq!(out[w], want);
    }
}

#[test]
fn integer_instruction_mix_matches_cpu() {
    let m = fixture();
    let mut rng = Rng::new(11);
    let n = 512;
    let a: Vec<i32> = (0..n).map(|_| rng.next_u32() as i32).collect();
    let mut b: Vec<i32> = (0..n)
        .map(|_| (rng.next_u32() as i32) >> (rng.next_u32() % 31))
        .collect();
    b[0] = 0;
    b[1] = -1;
    let mut mem = DevMem::new();
    let (da, db, dout) = (mem.upload(&a), mem.upload(&b), mem.alloc(n * 4));
    run(
        &m,
        "intmix",
        &Shape::linear(2, 256),
        &[
            Arg::Ptr(da),
            Arg::Ptr(db),
            Arg::Ptr(dout),
            Arg::I32(n as i32),
        ],
        &mem,
    )
    .unwrap();
    let out: Vec<i32> = mem.download(dout, n);
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let mut r = (x as u32).count_ones() as i32
            + (x as u32).leading_zeros() as i32
            + ((x as u32).reverse_bits() >> 20) as i32;
        r ^= ((i64::from(x) * i64::from(y)) >> 32) as i32;
        if y != 0 {
            r = r
                .wrapping_add(x.wrapping_div(y))
                .wrapping_add(x.wrapping_rem(y));
        }
        r = r.wrapping_add(x.min(y).wrapping_sub(x.max(y)));
        assert_eq!(out[i], r, "a={x} b={y}");
    }
}

#[test]
fn float_instruction_mix_matches_cpu() {
    let m = fixture();
    let mut rng = Rng::new(12);
    let n = 512;
    let a = rng.vec_f32(n, 1000.0);
    let mut mem = DevMem::new();
    let (da, dout, di) = (mem.upload(&a), mem.alloc(n * 4), mem.alloc(n * 4));
    run(
        &m,
        "floatmix",
        &Shape::linear(2, 256),
        &[
            Arg::Ptr(da),
            Arg::Ptr(dout),
            Arg::Ptr(di),
            Arg::I32(n as i32),
        ],
        &mem,
    )
    .unwrap();
    let out: Vec<f32> = mem.download(dout, n);
    let iout: Vec<i32> = mem.download(di, n);
    for i in 0..n {
        let x = a[i];
        let want = x.abs().sqrt() + x.max(0.5) - x.min(-0.5) + x / 3.0;
        assert!(
            (out[i] - want).abs() <= want.abs() * 1e-6,
            "{x}: {} vs {want}",
            out[i]
        );
        assert_eq!(iout[i], (x * 100.0) as i32 + x as i32, "{x}");
    }
}
