//! One host used from tokio tasks, blocking-pool threads and plain threads at once: every launch
//! binds the context itself, so nothing sees CUDA_ERROR_INVALID_CONTEXT.

use std::future::Future;
use std::sync::Arc;

use gpuhost::{Arg, LaunchConfig};

use crate::common::{TAG_A, bundle, expected, host, read_u32s, shared};

const N: u32 = 96;

/// Allocate, take the kernel, launch; the caller awaits or waits.
fn one(
    label: String,
    host: Arc<gpuhost::Host>,
    reg: Arc<gpuhost::Registry>,
) -> gpuhost::Result<(gpuhost::DeviceBuffer, gpuhost::Completion)> {
    let out = host.alloc(N as usize * 4)?;
    let k = reg.kernel_labeled("stamp", &label)?;
    let s = host.stream()?;
    let done = s.launch(
        &k,
        LaunchConfig::for_elements(N, 32),
        &[Arg::Buffer(&out, 0), Arg::U32(N)],
    )?;
    Ok((out, done))
}

#[test]
fn tokio_tasks_blocking_pool_and_plain_threads_launch_and_await_on_one_host() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .max_blocking_threads(8)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..64 {
            let (host, reg) = (host.clone(), reg.clone());
            tasks.push(tokio::spawn(async move {
                let (out, done) = one(format!("task-{t}"), host, reg)?;
                done.await?;
                gpuhost::Result::Ok(read_u32s(&out, N as usize))
            }));
        }
        for t in 0..8 {
            let (host, reg) = (host.clone(), reg.clone());
            tasks.push(tokio::task::spawn_blocking(move || {
                let (out, done) = one(format!("blocking-{t}"), host, reg)?;
                done.wait()?;
                gpuhost::Result::Ok(read_u32s(&out, N as usize))
            }));
        }
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (host, reg) = (host.clone(), reg.clone());
                std::thread::spawn(move || {
                    let (out, done) = one(format!("thread-{t}"), host, reg)?;
                    done.wait()?;
                    gpuhost::Result::Ok(read_u32s(&out, N as usize))
                })
            })
            .collect();
        for t in tasks {
            let got = t
                .await
                .unwrap()
                .unwrap_or_else(|e: gpuhost::Error| panic!("launch failed: {e}"));
            assert_eq!(got, expected(TAG_A, N));
        }
        for t in threads {
            let got = t
                .join()
                .unwrap()
                .unwrap_or_else(|e: gpuhost::Error| panic!("launch failed: {e}"));
            assert_eq!(got, expected(TAG_A, N));
        }
    });
}

#[test]
fn pending_launch_keeps_its_buffer_alive_until_complete() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let out = host.alloc(4096 * 4).unwrap();
    let keep = out.clone();
    let done = s
        .launch(
            &k,
            LaunchConfig::for_elements(4096, 128),
            &[Arg::Buffer(&out, 0), Arg::U32(4096)],
        )
        .unwrap();
    drop(out);
    done.wait().unwrap();
    // The clone still reads what the launch wrote: the allocation was not freed under it.
    assert_eq!(read_u32s(&keep, 4096), expected(TAG_A, 4096));
}

#[test]
fn device_facts_come_from_the_driver() {
    let _g = shared();
    let Some(host) = host() else { return };
    let f = host.facts();
    let info = gpuhost::driver().unwrap();
    println!("{} on {:?}: {f:?}", info.kind, info.path);
    assert!(!f.name.is_empty());
    assert!(f.compute_capability.0 >= 3);
    assert!(
        f.max_threads_per_block >= 64 && f.max_block_dim[0] >= 64 && f.max_grid_dim[0] >= 65535
    );
    assert!(f.max_shared_mem_per_block >= 16 * 1024 && f.sm_count >= 1 && f.warp_size == 32);
    assert_eq!(f.driver_version, info.version);
    let m = host.mem_info().unwrap();
    assert_eq!(m.total, f.total_memory);
    assert!(m.free <= m.total);
    assert!(
        Arc::ptr_eq(&host, &gpuhost::host(0).unwrap()),
        "one host per ordinal"
    );
    assert!(matches!(
        gpuhost::host(1000),
        Err(gpuhost::Error::NoDevice { ordinal: 1000, .. })
    ));
}

#[test]
fn a_blocking_wait_completes_every_launch_queued_before_it() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let out = host.alloc(256 * 4).unwrap();
    let launch = || {
        s.launch(
            &k,
            LaunchConfig::for_elements(256, 64),
            &[Arg::Buffer(&out, 0), Arg::U32(256)],
        )
        .unwrap()
    };
    let first: Vec<_> = (0..3).map(|_| launch()).collect();
    launch().wait().unwrap();
    // The waiting thread's event covered the earlier launches, so they are done. Their
    // Completions are marked at once when the wait completed their batch itself, or a moment
    // later when the completion thread had already taken it (an idle flush, when this thread
    // was descheduled for longer than that between launches — seen with parallel tests).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !first.iter().all(|c| c.is_done()) {
        assert!(
            std::time::Instant::now() < deadline,
            "launches queued before a completed wait() were not marked done"
        );
        std::thread::yield_now();
    }
    for c in first {
        c.wait().unwrap();
    }
    assert_eq!(read_u32s(&out, 256), expected(TAG_A, 256));
}

#[test]
fn a_fence_resolves_after_the_launches_and_event_waits_queued_before_it() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let (s1, s2) = (host.stream().unwrap(), host.stream().unwrap());
    let n = 1 << 16;
    let (a, b) = (
        host.alloc(n as usize * 4).unwrap(),
        host.alloc(n as usize * 4).unwrap(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // On one stream: the fence closes the open batch, so the launch completes with it.
    let cfg = LaunchConfig::for_elements(n, 128);
    let launched = s1
        .launch(&k, cfg, &[Arg::Buffer(&a, 0), Arg::U32(n)])
        .unwrap();
    rt.block_on(s1.fence().unwrap()).unwrap();
    assert!(launched.is_done());
    assert_eq!(read_u32s(&a, n as usize), expected(TAG_A, n));
    // Across streams: s2's fence comes after its wait for s1's event, so after s1's launch.
    let _pending = s1
        .launch(&k, cfg, &[Arg::Buffer(&b, 0), Arg::U32(n)])
        .unwrap();
    let reached = s1.record().unwrap();
    s2.wait(&reached).unwrap();
    rt.block_on(s2.fence().unwrap()).unwrap();
    assert_eq!(read_u32s(&b, n as usize), expected(TAG_A, n));
    // Nothing queued: it still resolves, and so does its blocking wait.
    rt.block_on(s2.fence().unwrap()).unwrap();
    s2.fence().unwrap().wait().unwrap();
}

/// A kernel that spins until `*flag` is nonzero (a volatile load: the host's write is seen).
const SPIN_UNTIL_SET: &str = r#"
.version 7.0
.target sm_50
.address_size 64
.visible .entry spin(.param .u64 flag)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [flag];
    cvta.to.global.u64 %rd1, %rd0;
WAIT:
    ld.volatile.global.u32 %r0, [%rd1];
    setp.eq.u32 %p0, %r0, 0;
    @%p0 bra WAIT;
    ret;
}
"#;

#[test]
fn a_dropped_stream_still_running_a_kernel_is_not_handed_out_until_idle() {
    // Alone: the pool's order is observed.
    let _g = crate::common::exclusive();
    let Some(host) = host() else { return };
    let source = gpuhost::ModuleSource::new(
        "spin",
        gpuhost::ModuleImage::Ptx(SPIN_UNTIL_SET.to_string()),
    );
    let reg = gpuhost::Registry::from_sources(&host, "spin", vec![source]).unwrap();
    let spin = reg.kernel("spin").unwrap();
    let flag = host.alloc(4).unwrap();
    flag.fill(0, 4, 0).unwrap();
    let busy = host.stream().unwrap();
    let busy_raw = busy.raw() as usize;
    let done = busy
        .launch(
            &spin,
            LaunchConfig {
                grid: [1, 1, 1],
                block: [1, 1, 1],
                shared_mem_bytes: 0,
            },
            &[Arg::Buffer(&flag, 0)],
        )
        .unwrap();
    drop(busy);
    let taken: Vec<_> = (0..4).map(|_| host.stream().unwrap()).collect();
    assert!(
        taken.iter().all(|s| s.raw() as usize != busy_raw),
        "the stream still running a kernel was handed out again"
    );
    drop(taken);
    flag.write(0, &1u32.to_le_bytes()).unwrap();
    done.wait().unwrap();
    // Idle now: the next streams taken include it again (the pool is reused, not grown).
    let taken: Vec<_> = (0..5).map(|_| host.stream().unwrap()).collect();
    assert!(
        taken.iter().any(|s| s.raw() as usize == busy_raw),
        "the stream went idle but never came back to the pool"
    );
}

/// One task's share of `awaits_and_drops_racing_on_shared_streams_...`: `ROUNDS` launches into
/// its own buffer on `s`, each awaited, dropped unpolled, polled once then dropped, or awaited
/// from another task; returns how many it launched.
async fn race_round(
    t: usize,
    s: Arc<gpuhost::Stream>,
    k: Arc<gpuhost::Kernel>,
    out: Arc<gpuhost::DeviceBuffer>,
) -> gpuhost::Result<u64> {
    const ROUNDS: usize = 40;
    let cfg = LaunchConfig::for_elements(N, 32);
    let launch = || s.launch(&k, cfg, &[Arg::Buffer(&out, 0), Arg::U32(N)]);
    for round in 0..ROUNDS {
        let done = launch()?;
        match (t + round) % 4 {
            0 => done.await?,
            1 => drop(done),
            2 => {
                // Polled once (it may record and own its batch, then hand it over), then
                // dropped with its waker registered.
                let mut done = Box::pin(done);
                std::future::poll_fn(|cx| {
                    let _ = done.as_mut().poll(cx);
                    std::task::Poll::Ready(())
                })
                .await;
            }
            _ => tokio::spawn(done).await.expect("the awaiting task ran")?,
        }
    }
    // The last launch awaited: everything before it on the stream has finished too.
    launch()?.await?;
    Ok(ROUNDS as u64 + 1)
}

#[test]
fn awaits_and_drops_racing_on_shared_streams_resolve_every_awaited_launch_and_complete_each_batch_once()
 {
    // Alone: the spin budget is the host's, and this test changes it.
    let _g = crate::common::exclusive();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = Arc::new(reg.kernel("stamp").unwrap());
    let before = host.await_spin();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // A budget too short for any kernel (every owning poll hands its batch over), and one
    // long enough that owning polls complete batches themselves, other tasks' launches too.
    for budget in [std::time::Duration::from_nanos(1), gpuhost::MAX_AWAIT_SPIN] {
        host.set_await_spin(budget);
        let start = crate::common::settled_stats(&host);
        let streams: Vec<_> = (0..4).map(|_| Arc::new(host.stream().unwrap())).collect();
        let outs: Vec<_> = (0..24)
            .map(|_| Arc::new(host.alloc(N as usize * 4).unwrap()))
            .collect();
        let launched: u64 = rt.block_on(async {
            let tasks: Vec<_> = outs
                .iter()
                .enumerate()
                .map(|(t, out)| {
                    let s = streams[t % streams.len()].clone();
                    tokio::spawn(race_round(t, s, k.clone(), out.clone()))
                })
                .collect();
            let mut n = 0;
            for t in tasks {
                n += t
                    .await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{budget:?}: an awaited launch failed: {e}"));
            }
            n
        });
        for out in &outs {
            assert_eq!(read_u32s(out, N as usize), expected(TAG_A, N), "{budget:?}");
        }
        drop(streams);
        let end = crate::common::settled_stats(&host);
        assert_eq!(end.launches - start.launches, launched, "{budget:?}");
        assert_eq!(
            end.pending_launches, 0,
            "{budget:?}: a batch was never completed (lost by a hand-over)"
        );
    }
    host.set_await_spin(before);
}
