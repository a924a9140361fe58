//! The guest-vs-native benchmark runs both sides and reports medians (values, not speed, are
//! checked here; speed is for the bench run on the GPU).

use crate::{device, guest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_vs_native_bench_measures_every_pattern_on_both_sides() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let r = gpuhost_wasm::bench::guest_vs_native(rt, &guest("launchbench"), 40)
        .await
        .unwrap();
    assert_eq!(r.samples, 40);
    for (what, p) in [
        ("native", r.native),
        ("guest", r.guest),
        ("bound", r.guest_bound),
        ("sandboxed", r.sandboxed),
        ("sandboxed bound", r.sandboxed_bound),
    ] {
        assert!(p.alone > 0 && p.burst > 0, "{what}: {r:?}");
        assert!(
            p.roundtrip >= p.alone,
            "{what}: a round trip shorter than its launch: {r:?}"
        );
    }
    assert!(r.guest_clock_ns > 0 && r.guest_import_ns > 0, "{r:?}");
    let t = r.transfers;
    assert_eq!(t.bytes, 64 << 20, "{t:?}");
    for (what, (up, down)) in [
        ("pinned", t.pinned),
        ("pageable", t.pageable),
        ("guest", t.guest),
    ] {
        assert!(up > 0 && down > 0, "{what} transfers: {t:?}");
    }
    let table = r.markdown();
    assert_eq!(table.matches("| bound launch").count(), 4, "{table}");
    assert_eq!(table.matches("| measure |").count(), 2, "{table}");
    assert!(table.contains("| sandboxed guest |"), "{table}");
    assert!(table.contains("| 64 MiB transfer |"), "{table}");
    assert!(r.json().starts_with("{\"device\":"));
}
