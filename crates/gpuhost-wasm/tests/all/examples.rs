//! Each example guest end to end: it computes on the device, checks its own result on the CPU
//! and prints it.

use crate::{assert_ok, device, guest, opts, run, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saxpy_guest_computes_and_checks_its_result() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "saxpy", &["10000"]).await.unwrap();
    assert_ok(&o, "saxpy ok n=10000");
    // checksum = sum(2.5 * 0.5 i + 1 - i) = sum(1 + 0.25 i) over i < 10000.
    let want = 10000.0 + 0.25 * (9999.0 * 10000.0 / 2.0);
    let got: f64 = stdout(&o)
        .trim()
        .rsplit('=')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((got - want).abs() / want < 1e-5, "checksum {got} vs {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reduce_guest_sums_in_two_passes_and_checks_exactly() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "reduce", &["100000"]).await.unwrap();
    let want: u64 = (0..100_000u64).map(|i| i % 7).sum();
    assert_ok(&o, &format!("reduce ok n=100000 sum={want}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiled_matmul_guest_matches_the_cpu_product_including_partial_tiles() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "matmul", &["40", "24", "56"]).await.unwrap();
    assert_ok(&o, "matmul ok m=40 n=24 k=56");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_reporting_a_wrong_result_exits_nonzero() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // The reduce guest refuses sizes that need three passes: exit code 1 from its own check.
    let o = run(rt, "reduce", &["1000000"]).await.unwrap();
    assert_eq!(o.exit_code, 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs more than two passes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_guest_prints_the_same_checked_result_sandboxed_as_trusted() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    assert!(
        gpuhost_wasm::Limits::default().sandbox,
        "guests run sandboxed by default"
    );
    for (name, args) in [
        ("saxpy", &["4099"][..]),
        ("reduce", &["70001"][..]),
        ("matmul", &["33", "17", "45"][..]),
    ] {
        let mut outs = Vec::new();
        for sandbox in [true, false] {
            let mut o = opts(name, args);
            o.limits.sandbox = sandbox;
            let out = rt.run(&guest(name), o).await.unwrap();
            assert_ok(&out, &format!("{name} ok"));
            outs.push(stdout(&out));
        }
        assert_eq!(outs[0], outs[1], "{name}: sandboxed vs trusted");
    }
}
