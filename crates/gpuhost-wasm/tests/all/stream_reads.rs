//! Guest `buffer.read-stream` (the `reads` test guest): bytes round trip at every size from the
//! runtime's staging reserve; out-of-range reads give typed errors; reads dropped midway, by the
//! guest or with the whole Store, give everything back; the host writes only inside the window
//! each read hands over, and a window outside guest memory traps the guest, not the host. Also
//! `stream.read-after`'s sizes and errors (its order behind launches, and its reports of their
//! errors, are the red-team suite's `-after` attacks).

use gpuhost_wasm::Error;

use crate::transfers::{assert_buffers_freed, drop_run_midway, registrations};
use crate::{assert_ok, device, device_alone, guest, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_reads_of_every_size_round_trip_without_page_locking_memory() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let before = registrations(rt.host());
    let o = run(rt, "reads", &["round-trips"]).await.unwrap();
    assert_ok(&o, "round-trips ok");
    assert_eq!(
        registrations(rt.host()),
        before,
        "stream reads took all their staging from the runtime's reserve"
    );
}

#[test]
fn only_guests_that_use_streams_run_on_the_engine_with_async_support() {
    let Some(rt) = crate::runtime() else {
        return;
    };
    assert!(
        wasmtime::Engine::same(guest("misbehave").engine(), rt.engine()),
        "a guest without streams keeps every host call free of async bookkeeping"
    );
    assert!(
        !wasmtime::Engine::same(guest("reads").engine(), rt.engine()),
        "a guest that reads through a stream gets the engine that supports it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_and_over_quota_stream_reads_get_typed_errors() {
    let Some((rt, _shared)) = device().await else {
        return;
    };
    let o = run(rt, "reads", &["errors"]).await.unwrap();
    assert_ok(&o, "errors ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_after_a_stream_round_trip_at_every_size_and_bad_ones_get_typed_errors() {
    let Some((rt, _shared)) = device().await else {
        return;
    };
    let o = run(rt, "reads", &["read-after"]).await.unwrap();
    assert_ok(&o, "read-after ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_reads_dropped_midway_give_back_their_staging_and_their_place() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let before = registrations(host);
    let o = run(rt, "reads", &["drop-midway"]).await.unwrap();
    assert_ok(&o, "drop-midway ok");
    assert_eq!(
        registrations(host),
        before,
        "the dropped reads' staging went back to the reserve"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_read_left_undrained_never_stalls_another() {
    let Some((rt, _shared)) = device().await else {
        return;
    };
    let o = run(rt, "reads", &["starved"]).await.unwrap();
    assert_ok(&o, "starved ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_writes_a_stream_read_only_inside_the_window_the_guest_handed_over() {
    let Some((rt, _shared)) = device().await else {
        return;
    };
    let o = run(rt, "reads", &["canary"]).await.unwrap();
    assert_ok(&o, "canary ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_window_past_the_end_of_guest_memory_traps_the_guest_and_not_the_host() {
    let Some((rt, _shared)) = device().await else {
        return;
    };
    match run(rt, "reads", &["oob-pointer"]).await {
        Err(Error::Trap {
            out_of_fuel: false, ..
        }) => {}
        other => panic!("expected a trap, got {other:?}"),
    }
    let o = run(rt, "reads", &["canary"]).await.unwrap();
    assert_ok(&o, "canary ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_during_a_stream_read_ends_it_at_once_and_leaves_the_host_usable() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let buffers = host.stats().live_buffers;
    let before = registrations(host);
    // The Store goes with the guest's memory and the read's download, while the guest waits
    // for the device or copies.
    drop_run_midway(rt, "reads", &["read-forever"], "reading").await;
    let o = run(rt, "reads", &["round-trips"]).await.unwrap();
    assert_ok(&o, "round-trips ok");
    assert_eq!(
        registrations(host),
        before,
        "the dropped read's staging went back to the reserve"
    );
    assert_buffers_freed(host, buffers).await;
}
