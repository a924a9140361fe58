//! Guest `buffer.write` and `buffer.read`: bytes round trip at every size, served by the
//! runtime's staging reserve (no page-locking while guests run), and a run dropped in the middle
//! of a write stops at once, leaving nothing behind that reads the guest's memory.

use std::time::Duration;

use gpuhost_wasm::{Output, OutputPipe};

use crate::{assert_ok, device_alone, guest, opts, run};

/// The host's page-locked registrations once the completion thread has released what the
/// device finished with (every transfer region goes back to the pool).
fn registrations(host: &gpuhost::Host) -> u64 {
    host.synchronize().unwrap();
    host.stats().pinned_registrations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_writes_and_reads_of_every_size_round_trip_without_page_locking_memory() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let before = registrations(rt.host());
    let o = run(rt, "misbehave", &["transfers"]).await.unwrap();
    assert_ok(&o, "transfers ok");
    assert_eq!(
        registrations(rt.host()),
        before,
        "guest transfers took all their staging from the runtime's reserve"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_during_a_guest_write_ends_it_at_once_and_leaves_the_host_usable() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let buffers = host.stats().live_buffers;
    let before = registrations(host);
    let pipe = OutputPipe::new(1024);
    let mut o = opts("misbehave", &["write-forever"]);
    o.stdout = Output::Pipe(pipe.clone());
    let g = guest("misbehave");
    {
        let run = rt.run(&g, o);
        tokio::pin!(run);
        let writing = async {
            while !String::from_utf8_lossy(&pipe.contents()).contains("writing") {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // The guest writes back to back: it is now all but surely inside a write.
            tokio::time::sleep(Duration::from_millis(30)).await;
        };
        tokio::select! {
            r = &mut run => panic!("the guest ended on its own: {r:?}"),
            () = writing => {}
        }
        // Dropping the run drops its Store, and with it the guest's linear memory, while the
        // write's future is suspended. A staging thread still reading that memory would fault
        // and end this process.
    }
    let o = run(rt, "misbehave", &["transfers"]).await.unwrap();
    assert_ok(&o, "transfers ok");
    assert_eq!(
        registrations(host),
        before,
        "the dropped write's staging went back to the reserve"
    );
    // Earlier tests' buffers may still be on their way out (never in: this test runs alone).
    let mut live = host.stats().live_buffers;
    for _ in 0..500 {
        if live <= buffers {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        live = host.stats().live_buffers;
    }
    assert!(
        live <= buffers,
        "the dropped guest's buffer was freed: {buffers} live before, {live} after"
    );
}
