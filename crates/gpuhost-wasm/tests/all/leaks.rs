//! Everything a guest holds is released when its run ends, however it ends: counted on the
//! host (live buffers, modules, streams, events, pending launches) and in device memory.

use gpuhost_wasm::{Error, Output};

use crate::{device_alone, guest, opts};

const RUNS: usize = 10_000;
const CONCURRENCY: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_runs_including_trapping_and_leaking_guests_leave_no_device_memory_or_handles()
{
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host().clone();
    let g = guest("misbehave");
    let modes = ["tiny", "leak", "trap", "tiny"];
    let run_one = |i: usize| {
        let g = g.clone();
        async move {
            let mode = modes[i % 4];
            let mut o = opts("misbehave", &[mode]);
            o.stdout = Output::Null;
            let r = rt.run(&g, o).await;
            match (mode, r) {
                ("trap", Err(Error::Trap { .. })) => {}
                (_, Ok(out)) if out.exit_code == 0 => {}
                (m, other) => panic!("run {i} ({m}): {other:?}"),
            }
        }
    };
    // Warm up gpuhost's stream and event pools at the concurrency used below.
    futures_join(CONCURRENCY, CONCURRENCY, &run_one).await;
    let before = settle(&host);
    let mem_before = host.mem_info().unwrap();

    futures_join(RUNS, CONCURRENCY, &run_one).await;
    let after = settle(&host);
    let mem_after = host.mem_info().unwrap();
    assert_eq!(
        after.live_buffers, before.live_buffers,
        "{before:?} -> {after:?}"
    );
    assert_eq!(
        after.live_modules, before.live_modules,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.pending_launches, 0, "{after:?}");
    assert_eq!(after.drop_errors, before.drop_errors, "{after:?}");
    assert!(
        after.launches >= before.launches + (RUNS / 2) as u64,
        "the runs launched: {after:?}"
    );
    // Streams and events are pooled by gpuhost: bounded by the concurrency, not the run count.
    let bound = (CONCURRENCY * 4) as u64;
    assert!(
        after.live_streams <= before.live_streams + bound,
        "streams grow with runs: {before:?} -> {after:?}"
    );
    assert!(
        after.live_events <= before.live_events + bound * 3,
        "events grow with runs: {before:?} -> {after:?}"
    );
    // softcuda's accounting is exact; NVIDIA's driver may grow its own internal pools a little.
    let slack = match gpuhost::driver().map(|d| d.kind) {
        Ok(gpuhost::DriverKind::Softcuda) => 0,
        _ => 32 << 20,
    };
    assert!(
        mem_after.free + slack >= mem_before.free,
        "device memory: {mem_before:?} -> {mem_after:?}"
    );
}

/// The host's counters once the device is idle and gpuhost's completion thread has released
/// what finished launches kept alive (it does so just after they complete, on its own thread).
/// The host's stats once they have stopped changing for longer than the watchdog sleeps while
/// idle (100 ms): it releases a dropped Store's control block on its next wake.
fn settle(host: &gpuhost::Host) -> gpuhost::HostStats {
    host.synchronize().unwrap();
    let mut last = host.stats();
    let mut stable = 0;
    for _ in 0..1000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let now = host.stats();
        stable = if now == last { stable + 1 } else { 0 };
        if stable >= 25 && now.pending_launches == 0 {
            return now;
        }
        last = now;
    }
    last
}

/// Runs `f(0..n)` with at most `width` at once.
async fn futures_join<F, Fut>(n: usize, width: usize, f: &F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    let mut i = 0;
    while i < n || !set.is_empty() {
        while i < n && set.len() < width {
            set.spawn(f(i));
            i += 1;
        }
        if let Some(r) = set.join_next().await {
            r.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_stream_synchronized_before_its_drop_goes_back_to_the_pool_unasked() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host().clone();
    let g = guest("misbehave");
    // The driver queries of N runs of `mode`: "tiny" synchronizes its stream before dropping
    // it, "unsynced" does not; both make the same other streams (the context's transfer stream,
    // the arena's zeroing), which go back asked.
    const N: u64 = 20;
    let queries = |mode: &'static str| {
        let (g, host) = (g.clone(), host.clone());
        async move {
            let before = settle(&host).stream_idle_queries;
            for _ in 0..N {
                let mut o = opts("misbehave", &[mode]);
                o.stdout = Output::Null;
                let out = rt.run(&g, o).await.unwrap();
                assert_eq!(out.exit_code, 0, "{mode}");
            }
            settle(&host).stream_idle_queries - before
        }
    };
    queries("tiny").await;
    let (tiny, unsynced) = (queries("tiny").await, queries("unsynced").await);
    assert!(
        tiny + N <= unsynced,
        "{tiny} driver queries over {N} runs that synchronized their stream, {unsynced} over runs that did not: the settled streams were asked too"
    );
}
