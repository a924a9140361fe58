//! The primary context torn down under the host (foreign reset, extra release): ContextLost for
//! old-generation handles, never a launch; then recovery with correct results. A kernel fault is
//! not recoverable: ContextPoisoned for the rest of the process, even after a reset. A loss
//! with launches still queued resolves every one of their Completions (Ok or ContextLost).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuhost::sys::{self, CUresult};
use gpuhost::{Arg, Error, Host, LaunchConfig};

use crate::common::{
    TAG_A, bundle, device, exclusive, expected, host, in_child, read_u32s, stamp, two_workers,
};

fn primary_active() -> bool {
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: valid out pointers; device from cuDeviceGet.
    let r = unsafe { sys::cuDevicePrimaryCtxGetState(device(), &mut flags, &mut active) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    active != 0
}

/// Handles of the current generation, working.
struct World {
    reg: Arc<gpuhost::Registry>,
    kernel: gpuhost::Kernel,
    stream: gpuhost::Stream,
    out: gpuhost::DeviceBuffer,
}

fn world(host: &Arc<Host>) -> World {
    let reg = gpuhost::Registry::load(host, bundle("stamp-a")).unwrap();
    let kernel = reg.kernel_labeled("stamp", "context-loss-test").unwrap();
    let stream = host.stream().unwrap();
    let out = host.alloc(256 * 4).unwrap();
    assert_eq!(
        stamp(&stream, &kernel, &out, 256).unwrap(),
        expected(TAG_A, 256)
    );
    World {
        reg,
        kernel,
        stream,
        out,
    }
}

/// After a loss: every old handle refuses with ContextLost { new generation }; new ones work.
fn assert_lost_then_recovered(host: &Arc<Host>, old: World, old_generation: u64) {
    let gen_now = old_generation + 1;
    let fresh_out = host.alloc(256 * 4).unwrap();
    let lost = |r: gpuhost::Result<()>, what: &str| match r {
        Err(Error::ContextLost { generation }) => assert_eq!(generation, gen_now, "{what}"),
        other => panic!("{what}: expected ContextLost, got {other:?}"),
    };
    assert_eq!(host.generation(), gen_now);
    // Stale kernel on a fresh stream with a fresh buffer: refused before reaching the driver.
    let s = host.stream().unwrap();
    lost(
        s.launch(
            &old.kernel,
            LaunchConfig::for_elements(256, 64),
            &[Arg::Buffer(&fresh_out, 0), Arg::U32(256)],
        )
        .map(|_| ()),
        "stale kernel",
    );
    lost(old.stream.synchronize(), "stale stream");
    lost(old.out.read(0, &mut [0u8; 4]), "stale buffer");
    lost(old.reg.kernel("stamp").map(|_| ()), "stale registry");
    drop(old);
    let again = world(host);
    assert_eq!(
        stamp(&again.stream, &again.kernel, &again.out, 256).unwrap(),
        expected(TAG_A, 256)
    );
    assert_eq!(read_u32s(&again.out, 4)[3], TAG_A + 3);
}

#[test]
fn a_million_entries_from_many_threads_hold_exactly_one_retain() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let old = world(&host);
    let g0 = host.generation();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let h = host.clone();
            std::thread::spawn(move || {
                for _ in 0..125_000 {
                    h.enter().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        host.generation(),
        g0,
        "entries alone never change the generation"
    );
    // If the host held exactly one retain: +1 -2 brings the count to zero and the context dies.
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out pointer; device from cuDeviceGet. This is the test's own extra retain.
    let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    for _ in 0..2 {
        // SAFETY: releasing our retain and then the host's, on purpose.
        let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(device()) };
        assert_eq!(r, CUresult::CUDA_SUCCESS);
    }
    assert!(
        !primary_active(),
        "a count above one would keep the primary context active"
    );
    host.enter().unwrap();
    assert!(primary_active(), "the host re-retained on its next entry");
    assert_lost_then_recovered(&host, old, g0);
    assert!(host.stats().context_losses >= 1);
}

#[test]
fn foreign_primary_ctx_reset_yields_context_lost_then_recovery() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let old = world(&host);
    let g0 = host.generation();
    // SAFETY: a foreign reset, on purpose: destroys the context with all its objects.
    let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(device()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    assert_lost_then_recovered(&host, old, g0);
}

/// Longest any Completion may take to resolve: past it, the test fails as a hang.
const RESOLVE_WITHIN: Duration = Duration::from_secs(30);

/// A launch's outcome after a loss: done (the reset waited for it) or lost (it aborted it);
/// true when lost.
fn ok_or_lost(r: gpuhost::Result<()>, what: &str) -> bool {
    match r {
        Ok(()) => false,
        Err(Error::ContextLost { .. }) => true,
        Err(e) => panic!("{what}: expected Ok or ContextLost, got {e:?}"),
    }
}

#[test]
fn foreign_reset_with_launches_queued_resolves_every_completion_then_recovers() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let old = world(&host);
    let g0 = host.generation();
    const LAUNCHES: usize = 300;
    const N: u32 = 4096;
    let burst_out = host.alloc(N as usize * 4).unwrap();
    let live_with_burst = host.stats().live_buffers;
    let rt = two_workers();
    let (mut awaited, mut waited) = (Vec::new(), Vec::new());
    for i in 0..LAUNCHES {
        let c = old
            .stream
            .launch(
                &old.kernel,
                LaunchConfig::for_elements(N, 64),
                &[Arg::Buffer(&burst_out, 0), Arg::U32(N)],
            )
            .unwrap();
        match i % 3 {
            0 => {
                awaited.push(rt.spawn(async move { tokio::time::timeout(RESOLVE_WITHIN, c).await }))
            }
            1 => waited.push(c),
            _ => drop(c),
        }
    }
    // Only the queued launches hold the buffer now. Stats first, then the last launch: if it is
    // still pending after the snapshot, its batch (which releases the buffer before finishing)
    // held the buffer during the snapshot.
    drop(burst_out);
    let before_reset = host.stats();
    let last_pending = !waited.last().unwrap().is_done();
    if last_pending {
        assert_eq!(
            before_reset.live_buffers, live_with_burst,
            "the buffer of a pending launch was freed"
        );
    }
    println!(
        "at the reset: {} launch(es) pending, last one pending: {last_pending}",
        before_reset.pending_launches
    );
    // SAFETY: a foreign reset, on purpose, with launches queued: destroys the context with all
    // its objects (on NVIDIA's driver after waiting for or aborting the work in flight).
    let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(device()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);

    // wait() blocks, so each runs on its own thread and a hang shows as a timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    let n_waited = waited.len();
    for c in waited {
        let tx = tx.clone();
        std::thread::spawn(move || tx.send(c.wait()).unwrap());
    }
    let (deadline, mut lost) = (Instant::now() + RESOLVE_WITHIN, 0);
    for i in 0..n_waited {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => lost += usize::from(ok_or_lost(r, "a waited completion")),
            Err(e) => panic!("{} of {n_waited} wait()s did not return: {e}", n_waited - i),
        }
    }
    for task in awaited {
        match rt.block_on(task).expect("the awaiting task did not panic") {
            Ok(r) => lost += usize::from(ok_or_lost(r, "an awaited completion")),
            Err(_) => panic!("an awaited completion did not resolve in {RESOLVE_WITHIN:?}"),
        }
    }
    println!("{lost} kept completion(s) lost, the others completed");
    assert_lost_then_recovered(&host, old, g0);
    // Dropped completions resolve too: nothing stays pending, and the burst's buffer is gone.
    let deadline = Instant::now() + RESOLVE_WITHIN;
    while host.stats().pending_launches > 0 {
        assert!(
            Instant::now() < deadline,
            "launches still pending after the loss: {:?}",
            host.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = host.stats();
    assert_eq!(after.generation, g0 + 1, "exactly one loss");
    assert_eq!(
        after.live_buffers,
        live_with_burst - 2,
        "the burst's and the old world's buffers are released, nothing else"
    );
}

#[test]
fn extra_primary_ctx_release_yields_context_lost_then_recovery() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let old = world(&host);
    let g0 = host.generation();
    // SAFETY: an extra release, on purpose: drops the host's one retain, destroying the context.
    let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(device()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    assert_lost_then_recovered(&host, old, g0);
}

#[test]
fn illegal_address_poisons_the_device_for_the_process_and_says_to_restart() {
    // The fault lasts for the process (NVIDIA's driver and softcuda alike), so it runs in a child.
    in_child(
        "context_loss::illegal_address_poisons_the_device_for_the_process_and_says_to_restart",
        poison_the_device,
    );
}

fn poison_the_device() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let poke = reg.kernel("poke").unwrap();
    let s = host.stream().unwrap();
    let out = host.alloc(256 * 4).unwrap();
    let r = s
        .launch(
            &poke,
            LaunchConfig::for_elements(1, 1),
            &[Arg::U64(8), Arg::U32(1)],
        )
        .and_then(|c| c.wait());
    let poisoned = |r: gpuhost::Result<()>, what: &str| match r {
        Err(e @ Error::ContextPoisoned { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("restart the process"), "{what}: {msg}");
        }
        other => panic!("{what}: expected ContextPoisoned, got {other:?}"),
    };
    poisoned(r, "the faulting launch");
    poisoned(host.synchronize(), "synchronize after the fault");
    poisoned(host.synchronize(), "synchronize again");
    poisoned(out.read(0, &mut [0u8; 4]), "reading a buffer");
    poisoned(host.alloc(64).map(drop), "allocating");
    // Dropping handles in the poisoned context records errors, never panics.
    drop((poke, s, reg, out));
    // SAFETY: what a user might try: reset the primary context. It does not recover the device.
    let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(device()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    poisoned(host.alloc(64).map(drop), "allocating after a reset");
    poisoned(host.stream().map(drop), "a stream after a reset");
    poisoned(
        gpuhost::Registry::load(&host, bundle("stamp-a")).map(drop),
        "loading a registry after a reset",
    );
    poisoned(host.synchronize(), "synchronize after a reset");
    let _ = host.stats();
}

#[test]
fn foreign_resets_during_transfers_end_them_ok_or_lost_then_transfers_work_again() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let rt = two_workers();
    const LEN: usize = 16 << 20;
    let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    let data = Arc::new(data);
    // Each round: transfers in flight on a task (staging chunks in use and pooled) while this
    // thread resets the context under them. Every transfer ends Ok or ContextLost, within a
    // bound — and never touches memory the reset freed (the chunks are ours, only registered).
    for round in 0..3 {
        let (stream, buf) = (host.stream().unwrap(), host.alloc(LEN).unwrap());
        let g = host.generation();
        let data_in = data.clone();
        let (started, on_start) = std::sync::mpsc::channel();
        let task = rt.spawn(async move {
            let mut back = vec![0u8; LEN];
            let mut outcomes = vec![stream.upload(&buf, 0, &data_in).await];
            started.send(()).unwrap();
            for _ in 0..4 {
                outcomes.push(stream.upload(&buf, 0, &data_in).await);
                let r = stream.download(&buf, 0, &mut back).await;
                if r.is_ok() {
                    assert!(
                        back == *data_in,
                        "a download that succeeded read the wrong bytes"
                    );
                }
                outcomes.push(r);
            }
            outcomes
        });
        on_start.recv().unwrap();
        std::thread::sleep(Duration::from_millis(1 + 2 * round));
        // SAFETY: a foreign reset, on purpose, with transfers in flight.
        let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(device()) };
        assert_eq!(r, CUresult::CUDA_SUCCESS);
        let outcomes = rt
            .block_on(async { tokio::time::timeout(RESOLVE_WITHIN, task).await })
            .expect("the transfers did not end in time")
            .expect("the transfer task did not panic");
        let lost = outcomes
            .into_iter()
            .filter(|r| ok_or_lost(r.clone(), "a transfer"))
            .count();
        println!("round {round}: {lost} of 9 transfers lost");
        // Recovered: a fresh stream and buffer of the new generation round-trip correctly.
        let (stream, buf) = (host.stream().unwrap(), host.alloc(LEN).unwrap());
        assert!(host.generation() > g, "the reset was seen");
        let mut back = vec![0u8; LEN];
        rt.block_on(async {
            stream.upload(&buf, 0, &data).await.unwrap();
            stream.download(&buf, 0, &mut back).await.unwrap();
        });
        assert!(
            back == *data,
            "transfers after recovery read the wrong bytes"
        );
    }
}
