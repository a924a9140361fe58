//! What a guest learns about its device, and events across streams.

use crate::{assert_ok, device, run, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_info_seen_by_the_guest_is_the_hosts() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "misbehave", &["info"]).await.unwrap();
    assert_ok(&o, "info ok");
    let f = rt.host().facts();
    let want = format!(
        "info name={:?} sm={} max_threads={} max_block_x={} max_grid_x={} cc={}.{}",
        f.name,
        f.sm_count,
        f.max_threads_per_block,
        f.max_block_dim[0],
        f.max_grid_dim[0],
        f.compute_capability.0,
        f.compute_capability.1
    );
    assert!(
        stdout(&o).contains(&want),
        "{:?} lacks {want:?}",
        stdout(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_time_a_launch_and_order_one_stream_after_another() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "misbehave", &["events"]).await.unwrap();
    assert_ok(&o, "events ok");
    assert!(stdout(&o).contains("events elapsed_ms="));
}
