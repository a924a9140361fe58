//! The guest-vs-native benchmark runs both sides and reports medians (values, not speed, are
//! checked here; speed is for the bench run on the GPU).

use crate::{device, guest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_vs_native_bench_measures_both_sides() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let r = gpuhost_wasm::bench::guest_vs_native(rt, &guest("misbehave"), 20)
        .await
        .unwrap();
    assert_eq!(r.samples, 20);
    assert!(r.native_launch_ns > 0 && r.guest_launch_ns > 0, "{r:?}");
    assert!(r.native_burst_ns > 0 && r.guest_burst_ns > 0, "{r:?}");
    assert!(r.guest_clock_ns > 0 && r.guest_import_ns > 0, "{r:?}");
    assert!(
        r.native_roundtrip_ns >= r.native_launch_ns && r.guest_roundtrip_ns >= r.guest_launch_ns,
        "{r:?}"
    );
    assert!(r.markdown().contains("| launch cost, in bursts of 32 |"));
    assert!(r.json().starts_with("{\"device\":"));
}
