//! Swapping models under load: thousands of launches across at least 20 swaps between two
//! registries whose kernels write distinguishable results; no launch fails and every result
//! comes from exactly one version.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use gpuhost::ModelSlot;

use crate::common::{TAG_A, TAG_B, bundle, expected, host, shared, stamp};

const N: u32 = 64;

#[test]
fn swap_under_load_fails_no_launch_and_each_result_is_one_version() {
    let _g = shared();
    let Some(host) = host() else { return };
    let generation = host.generation();
    let slot = Arc::new(ModelSlot::new(
        gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let launches = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (slot, stop, launches, host) =
                (slot.clone(), stop.clone(), launches.clone(), host.clone());
            std::thread::spawn(move || {
                let stream = host.stream().unwrap();
                let out = host.alloc(N as usize * 4).unwrap();
                let mut seen = [0u64; 2];
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let lease = slot.acquire(&format!("worker-{w}-req-{i}")).unwrap();
                    let k = lease.kernel("stamp").unwrap();
                    out.fill(0, N as usize * 4, 0).unwrap();
                    let got = stamp(&stream, &k, &out, N)
                        .unwrap_or_else(|e| panic!("launch failed during swaps: {e}"));
                    // Odd slot versions serve stamp-a, even ones stamp-b (swaps alternate).
                    let tag = if lease.version() % 2 == 1 {
                        TAG_A
                    } else {
                        TAG_B
                    };
                    assert_eq!(
                        got,
                        expected(tag, N),
                        "version {} gave a mixed or wrong result",
                        lease.version()
                    );
                    seen[(lease.version() % 2) as usize] += 1;
                    launches.fetch_add(1, Ordering::Relaxed);
                }
                seen
            })
        })
        .collect();
    let mut swaps = 0;
    while swaps < 20 || launches.load(Ordering::Relaxed) < 2000 {
        let next = if slot.version() % 2 == 1 {
            "stamp-b"
        } else {
            "stamp-a"
        };
        let report = slot
            .swap_load(bundle(next), Duration::from_secs(30))
            .unwrap();
        assert!(report.drained, "{report:?}");
        assert!(report.retired.is_none(), "old registry retired: {report:?}");
        assert_eq!(report.release.as_ref().unwrap().modules_queued, 1);
        swaps += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let mut seen = [0u64; 2];
    for w in workers {
        let s = w.join().unwrap();
        seen[0] += s[0];
        seen[1] += s[1];
    }
    println!(
        "{swaps} swaps, {} launches, per version parity {seen:?}",
        launches.load(Ordering::Relaxed)
    );
    assert!(swaps >= 20 && launches.load(Ordering::Relaxed) >= 2000);
    assert!(seen[0] > 0 && seen[1] > 0, "both versions served: {seen:?}");
    assert!(slot.retired().is_empty());
    assert_eq!(
        host.generation(),
        generation,
        "a swap never re-creates the context"
    );
}

#[test]
fn failed_load_during_swap_leaves_the_old_model_serving() {
    let _g = shared();
    let Some(host) = host() else { return };
    let slot = ModelSlot::new(gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap());
    let e = slot
        .swap_load(bundle("bad-ptx"), Duration::from_secs(1))
        .unwrap_err();
    assert!(matches!(e, gpuhost::Error::InvalidModule { .. }), "{e}");
    assert_eq!(slot.version(), 1);
    let lease = slot.acquire("after-failed-swap").unwrap();
    let s = host.stream().unwrap();
    let out = host.alloc(N as usize * 4).unwrap();
    assert_eq!(
        stamp(&s, &lease.kernel("stamp").unwrap(), &out, N).unwrap(),
        expected(TAG_A, N)
    );
}

#[test]
fn drain_timeout_retires_the_old_registry_instead_of_unloading_it() {
    let _g = shared();
    let Some(host) = host() else { return };
    let slot = ModelSlot::new(gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap());
    let lease = slot.acquire("slow-request").unwrap();
    let k = lease.kernel("stamp").unwrap();
    let report = slot.swap(
        gpuhost::Registry::load(&host, bundle("stamp-b")).unwrap(),
        Duration::from_millis(50),
    );
    assert!(!report.drained && report.release.is_none());
    assert!(
        report.retired.as_ref().unwrap().contains("drain timeout"),
        "{report:?}"
    );
    // The slow request still runs on its (old, still loaded) version.
    let s = host.stream().unwrap();
    let out = host.alloc(N as usize * 4).unwrap();
    assert_eq!(stamp(&s, &k, &out, N).unwrap(), expected(TAG_A, N));
    assert_eq!(slot.retired().len(), 1);
    assert!(slot.retry_retired().is_empty(), "still held by the request");
    drop((k, lease));
    let released = slot.retry_retired();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].registry, "stamp-a");
    assert!(slot.retired().is_empty());
}
