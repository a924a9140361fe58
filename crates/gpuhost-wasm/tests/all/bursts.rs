//! Graph batching of launch bursts (burst/): a guest's bursts replayed as CUDA graphs compute
//! and report exactly what the same guest computes launching one by one, trusted or sandboxed;
//! the guest cannot grow a batch or the graph cache past its limits (a sandboxed one's batch
//! past one watched segment); launches collected when a trusted Store goes still run, a
//! sandboxed Store's are discarded with its stopped work.

use std::time::Duration;

use gpuhost_wasm::{Limits, Output, OutputPipe, RunOptions, RunOutcome, Runtime};

use crate::transfers::assert_buffers_freed;
use crate::{device, device_alone, guest, opts, stdout};

/// Runs the bursts guest trusted, in `mode`, with graph batching as `limits` set it.
async fn run(rt: &Runtime, args: &[&str], limits: Limits) -> RunOutcome {
    let o = rt
        .run(
            &guest("bursts"),
            RunOptions {
                limits,
                ..opts("bursts", args)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        o.exit_code,
        0,
        "{args:?}: stdout {:?} stderr {:?}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn trusted() -> Limits {
    Limits {
        sandbox: false,
        ..Limits::default()
    }
}

fn unbatched() -> Limits {
    Limits {
        max_graph_batch: 0,
        ..trusted()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_bursts_compute_what_unbatched_launches_compute() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let batched = run(rt, &["results"], trusted()).await;
    let plain = run(rt, &["results"], unbatched()).await;
    assert_eq!(plain.graph_launches, 0, "batching off replayed a graph");
    assert!(
        batched.graph_launches > 100,
        "bursts were not replayed as graphs: {} launches were",
        batched.graph_launches
    );
    assert_eq!(stdout(&batched), stdout(&plain));
    // The sandboxed guest is batched too (in batches of one watched segment), and agrees.
    let sandboxed = run(rt, &["results"], Limits::default()).await;
    assert!(
        sandboxed.graph_launches > 100,
        "sandboxed bursts were not replayed as graphs: {} launches were",
        sandboxed.graph_launches
    );
    assert_eq!(stdout(&sandboxed), stdout(&plain));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_guests_batches_hold_at_most_one_watched_segment_of_launches() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // 23 launches: 8 + 8 + 7, all replayed, through two graph shapes (8 launches, and 7),
    // even with max_graph_batch 32; trusted, the same burst is then one graph of 23.
    let wide = Limits {
        max_graph_batch: 32,
        ..Limits::default()
    };
    let o = run(rt, &["cap", "23"], wide.clone()).await;
    assert_eq!(o.graph_launches, 23);
    assert_eq!(o.held_at_exit.cached_graphs, 2, "batches past 8 launches");
    let whole = run(
        rt,
        &["cap", "23"],
        Limits {
            sandbox: false,
            ..wide
        },
    )
    .await;
    assert_eq!(whole.held_at_exit.cached_graphs, 1);
    assert_eq!(stdout(&o), stdout(&whole));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffers_a_trusted_guest_dropped_are_freed_while_the_graphs_that_replayed_them_stay_cached()
{
    // Alone: the host's live buffers are counted.
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let before = host.stats().live_buffers;
    // 'refill' bursts are replayed from the cache (see the test below); '-hold' then keeps the
    // Store, and so its cached graphs, until the run is dropped.
    let pipe = OutputPipe::new(1024);
    let mut o = opts("bursts", &["refill-hold", "64"]);
    o.limits = trusted();
    o.stdout = Output::Pipe(pipe.clone());
    let g = guest("bursts");
    let run = rt.run(&g, o);
    tokio::pin!(run);
    let dropped = async {
        while !String::from_utf8_lossy(&pipe.contents()).contains("dropped") {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The cached graphs last ran the last round's buffer and bound launch, both dropped.
        assert_buffers_freed(host, before).await;
    };
    tokio::select! {
        r = &mut run => panic!("the guest ended on its own: {r:?}"),
        () = dropped => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_launches_in_collected_bursts_report_the_same_errors_at_the_call() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // Sandboxed too: a collected sandboxed launch is checked without its hidden arguments.
    let sandboxed = |l: Limits| Limits { sandbox: true, ..l };
    for (batching, plain) in [
        (trusted(), unbatched()),
        (sandboxed(trusted()), sandboxed(unbatched())),
    ] {
        let batched = run(rt, &["errors"], batching).await;
        let plain = run(rt, &["errors"], plain).await;
        assert!(
            batched.graph_launches > 0,
            "no burst was replayed as a graph"
        );
        let out = stdout(&batched);
        assert_eq!(out, stdout(&plain));
        for refusal in [
            "too few arguments: Err(Error::ArgMismatch",
            "block too large: Err(Error::InvalidLaunch",
            "offset past the end: Err(Error::OutOfBounds",
        ] {
            assert_eq!(out.matches(refusal).count(), 3, "{refusal} in {out}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_of_many_burst_shapes_keeps_at_most_its_cached_graphs() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let limits = Limits {
        max_cached_graphs: 3,
        ..trusted()
    };
    let o = run(rt, &["shapes", "12", "8"], limits).await;
    // 12 shapes; every burst after the first collects its last 7 launches into a new graph.
    assert_eq!(o.graph_launches, 11 * 7);
    assert_eq!(o.held_at_exit.cached_graphs, 3);
    let plain = run(rt, &["shapes", "12", "8"], unbatched()).await;
    assert_eq!(stdout(&o), stdout(&plain));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_burst_is_replayed_in_batches_of_at_most_max_graph_batch() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let limits = Limits {
        max_graph_batch: 5,
        ..trusted()
    };
    let o = run(rt, &["cap", "23"], limits).await;
    // Four full batches of 5 as graphs; the last 3 are too few for a graph.
    assert_eq!(o.graph_launches, 20);
    let whole = run(rt, &["cap", "23"], trusted()).await;
    assert_eq!(whole.graph_launches, 23);
    let plain = run(rt, &["cap", "23"], unbatched()).await;
    assert_eq!(stdout(&o), stdout(&plain));
    assert_eq!(stdout(&whole), stdout(&plain));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_collected_when_the_guest_exits_still_run_and_stay_counted() {
    let Some((rt, _device)) = device_alone().await else {
        return;
    };
    let mut launched = Vec::new();
    for (limits, collected) in [(trusted(), true), (unbatched(), false)] {
        let before = rt.host().stats().launches;
        let o = run(rt, &["exit-pending"], limits).await;
        let held = o.held_at_exit.launches_in_flight;
        if collected {
            // Collected launches cannot finish before they are issued.
            assert_eq!(held, 8, "{}", stdout(&o));
        } else {
            // Issued one by one, each may finish (and be retired by the next launch) before
            // the guest exits; only the count issued below is fixed.
            assert!(held <= 8, "{held} in flight: {}", stdout(&o));
        }
        rt.host().synchronize().unwrap();
        launched.push(rt.host().stats().launches - before);
    }
    assert_eq!(launched, [16, 16], "batched vs unbatched launches issued");
    // Sandboxed, the Store's drop stops its work: a collected burst (7: under the sandboxed
    // batch of 8, which would be issued at once) is discarded, not issued.
    let before = rt.host().stats().launches;
    let o = run(rt, &["exit-pending", "7"], Limits::default()).await;
    assert_eq!(o.held_at_exit.launches_in_flight, 7, "{}", stdout(&o));
    rt.host().synchronize().unwrap();
    assert_eq!(rt.host().stats().launches - before, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffer_and_bound_launch_dropped_after_replayed_bursts_give_their_quota_back() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // Each round's buffer takes 3/4 of the buffer quota: it fits only once the last round's
    // buffer and the bound launch sharing its quota are gone, which the cached graph that
    // replayed them (and keeps their launches to compare the next) must not hold back.
    let quota: u64 = 256 << 10;
    let n = (quota * 3 / 4 / 4).to_string();
    for sandbox in [true, false] {
        let limits = Limits {
            sandbox,
            max_buffer_bytes: quota,
            ..Limits::default()
        };
        let o = run(rt, &["refill", &n], limits).await;
        assert!(o.graph_launches > 0, "no burst was replayed as a graph");
        let out = stdout(&o);
        assert_eq!(
            out.matches("refill ").count(),
            3,
            "sandbox {sandbox}: {out}"
        );
    }
}
