//! Swap benchmark: request latency (acquire → kernel → launch → await) from worker threads,
//! first with no swaps, then while the main thread swaps between two registries; swap and load
//! times of each swap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use gpuhost::{Arg, Host, LaunchConfig, ModelSlot, ModuleImage, ModuleSource, Registry};

use super::stats::Summary;

const N: u32 = 1024;

/// What the swap benchmark measured.
#[derive(serde::Serialize)]
pub struct SwapResults {
    pub swaps: usize,
    pub swap_ms: Summary,
    pub load_ms: Summary,
    pub drain_ms: Summary,
    pub steady_us: Summary,
    pub swapping_us: Summary,
    pub failed: u64,
    pub retired: usize,
}

fn load(host: &Arc<Host>, name: &str, ptx: &str) -> Result<Arc<Registry>> {
    Ok(Registry::from_sources(
        host,
        name,
        vec![ModuleSource::new("stamp", ModuleImage::Ptx(ptx.into()))],
    )?)
}

/// Run worker threads against `slot` until `stop`; returns their request latencies (µs).
fn workers(
    host: &Arc<Host>,
    slot: &Arc<ModelSlot>,
    n: usize,
    stop: &Arc<AtomicBool>,
    failed: &Arc<AtomicU64>,
) -> Vec<std::thread::JoinHandle<Vec<f64>>> {
    (0..n)
        .map(|w| {
            let (host, slot, stop, failed) =
                (host.clone(), slot.clone(), stop.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let (Ok(stream), Ok(out)) = (host.stream(), host.alloc(N as usize * 4)) else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return lat;
                };
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let t = Instant::now();
                    let r = slot.acquire(&format!("w{w}-{i}")).and_then(|lease| {
                        let k = lease.kernel("stamp")?;
                        stream
                            .launch(
                                &k,
                                LaunchConfig::for_elements(N, 256),
                                &[Arg::Buffer(&out, 0), Arg::U32(N)],
                            )?
                            .wait()
                    });
                    match r {
                        Ok(()) => lat.push(t.elapsed().as_nanos() as f64 / 1000.0),
                        Err(e) => {
                            eprintln!("request failed: {e}");
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                lat
            })
        })
        .collect()
}

fn join(handles: Vec<std::thread::JoinHandle<Vec<f64>>>) -> Vec<f64> {
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect()
}

pub fn run(
    host: &Arc<Host>,
    first: Arc<Registry>,
    ptx_a: &str,
    ptx_b: &str,
    swaps: usize,
    steady_ms: u64,
    n_workers: usize,
) -> Result<SwapResults> {
    let slot = Arc::new(ModelSlot::new(first));
    let failed = Arc::new(AtomicU64::new(0));

    let stop = Arc::new(AtomicBool::new(false));
    let hs = workers(host, &slot, n_workers, &stop, &failed);
    std::thread::sleep(Duration::from_millis(steady_ms));
    stop.store(true, Ordering::Relaxed);
    let steady = join(hs);

    let stop = Arc::new(AtomicBool::new(false));
    let hs = workers(host, &slot, n_workers, &stop, &failed);
    let (mut swap_ms, mut load_ms, mut drain_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut retired = 0;
    // Spread the swaps over the same time as the steady phase, so both phases see comparable
    // numbers of requests.
    let interval = Duration::from_millis(steady_ms) / swaps.max(1) as u32;
    for i in 0..swaps {
        let started = Instant::now();
        let (name, ptx) = if i % 2 == 0 {
            ("bench-b", ptx_b)
        } else {
            ("bench-a", ptx_a)
        };
        let t = Instant::now();
        let new = load(host, name, ptx)?;
        load_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let report = slot.swap(new, Duration::from_secs(10));
        swap_ms.push(report.duration.as_secs_f64() * 1e3);
        drain_ms.push(report.drain_time.as_secs_f64() * 1e3);
        if report.retired.is_some() {
            retired += 1;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    let swapping = join(hs);
    Ok(SwapResults {
        swaps,
        swap_ms: Summary::of(swap_ms),
        load_ms: Summary::of(load_ms),
        drain_ms: Summary::of(drain_ms),
        steady_us: Summary::of(steady),
        swapping_us: Summary::of(swapping),
        failed: failed.load(Ordering::Relaxed),
        retired,
    })
}
