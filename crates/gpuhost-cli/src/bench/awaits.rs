//! `.await` of a launch under several spin budgets (`Host::set_await_spin`), on a parking
//! executor (`block_on`) and a yielding one, each beside the raw launch + cuStreamSynchronize in
//! alternating chunks: the budget that fits the machine, chosen by measurement. A second raw
//! anchor, launch + cuEventRecord + a tight cuEventQuery loop, is the floor of any event-based
//! completion: what gpuhost adds above it is its hand-off, not the event.

use std::time::{Duration, Instant};

use anyhow::Result;
use gpuhost::{Arg, Host, Kernel, LaunchConfig, Stream};

use super::raw::Raw;
use super::stats::{Summary, block_on, block_on_spin};

/// One budget's medians, µs.
#[derive(serde::Serialize)]
pub struct AwaitSpin {
    pub budget_us: f64,
    pub raw_sync_us: Summary,
    pub raw_event_us: Summary,
    pub parking_us: Summary,
    pub yielding_us: Summary,
}

/// The budgets swept.
pub const BUDGETS_US: [u64; 6] = [0, 2, 5, 10, 20, 50];

/// Measures `samples` launches per budget and variant; leaves the host's budget as it was.
pub fn run(
    host: &Host,
    stream: &Stream,
    noop: &Kernel,
    raw: &Raw,
    samples: usize,
) -> Result<Vec<AwaitSpin>> {
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let before = host.await_spin();
    let mut out = Vec::new();
    for budget in BUDGETS_US {
        host.set_await_spin(Duration::from_micros(budget));
        let mut variants: [&mut dyn FnMut() -> Result<()>; 4] = [
            &mut || {
                raw.launch(1)?;
                raw.sync()
            },
            &mut || {
                raw.launch(1)?;
                raw.record_and_query()
            },
            &mut || Ok(block_on(stream.launch(noop, cfg, &[Arg::U32(1)])?)?),
            &mut || Ok(block_on_spin(stream.launch(noop, cfg, &[Arg::U32(1)])?)?),
        ];
        let mut lat: [Vec<f64>; 4] = Default::default();
        for f in variants.iter_mut() {
            for _ in 0..(samples / 10).max(5) {
                f()?;
            }
        }
        let chunk = samples.clamp(1, 50);
        while lat[0].len() < samples {
            let k = chunk.min(samples - lat[0].len());
            for (f, v) in variants.iter_mut().zip(lat.iter_mut()) {
                for _ in 0..k {
                    let t = Instant::now();
                    f()?;
                    v.push(t.elapsed().as_nanos() as f64 / 1000.0);
                }
            }
        }
        let [raw_sync_us, raw_event_us, parking_us, yielding_us] = lat.map(Summary::of);
        out.push(AwaitSpin {
            budget_us: budget as f64,
            raw_sync_us,
            raw_event_us,
            parking_us,
            yielding_us,
        });
    }
    host.set_await_spin(before);
    Ok(out)
}

/// A markdown table, one row per budget.
pub fn print(rows: &[AwaitSpin], default: Duration) {
    println!(
        "\nLaunch → .await by spin budget (Host::set_await_spin; default {} µs), medians, µs",
        default.as_micros()
    );
    println!(
        "| spin budget, µs | raw launch + sync | raw launch + event query loop | parking (block_on) | ratio | yielding | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.3}× | {:.2} | {:.3}× |",
            r.budget_us,
            r.raw_sync_us.median,
            r.raw_event_us.median,
            r.parking_us.median,
            r.parking_us.median / r.raw_sync_us.median,
            r.yielding_us.median,
            r.yielding_us.median / r.raw_sync_us.median
        );
    }
}
