//! Where a guest launch's time goes (`gpuhost bench --guest`'s host-time table): one more run of
//! the trusted bench guest, with a call observer that keeps the time each `stream.launch` and
//! `stream.enqueue` spent inside the host call. The guest's own clock gives the whole launch, so
//! the difference is the guest's side (building and lowering the call) plus the component-model
//! crossing (lifting the arguments, the trampolines). The observer runs in its own pass, so its
//! clock reads do not touch the main table's figures.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use gpuhost_wasm::{CallObserver, Guest, HostCall, Limits, Runtime};

use super::guest_pass::run_bench_guest;
use super::guest_vs_native::{BURST, median};

/// Each `stream.launch` and `stream.enqueue` call's time inside the host, in call order.
#[derive(Default)]
struct CallSamples {
    launch: Mutex<Vec<u64>>,
    enqueue: Mutex<Vec<u64>>,
}

impl CallObserver for CallSamples {
    fn observe(&self, call: HostCall, elapsed: Duration) {
        let into = match call {
            HostCall::StreamLaunch => &self.launch,
            HostCall::StreamEnqueue => &self.enqueue,
            _ => return,
        };
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        into.lock().unwrap_or_else(|p| p.into_inner()).push(ns);
    }
}

/// Medians, in nanoseconds, of one launch path, timed by the guest (`total`, its clock pair
/// included when alone) and inside the host call (`host`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Split {
    /// Alone on an idle stream: (total, host).
    pub alone: (u128, u128),
    /// Within a burst of [`BURST`]: (total, host).
    pub burst: (u128, u128),
}

/// Both launch paths of one observed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostTime {
    /// `stream.launch` with its argument list.
    pub launch: Split,
    /// `stream.enqueue` of a bound launch.
    pub bound: Split,
}

/// The lone launches come first in the bench guest (`samples` of them, each followed by a
/// synchronize), then `samples / BURST` bursts; returns the median lone call and, as the guest
/// times its bursts, the median over bursts of a burst's mean call (a burst's last call may
/// issue the whole batch as a graph).
fn split(mut calls: Vec<u64>, samples: usize) -> Result<(u128, u128)> {
    let bursts = samples.div_ceil(BURST) * BURST;
    if calls.len() != samples + bursts {
        anyhow::bail!(
            "the bench guest made {} launch calls, not the {samples} alone and {bursts} in bursts it should have",
            calls.len()
        );
    }
    let per_burst = calls[samples..]
        .chunks(BURST)
        .map(|b| b.iter().map(|&ns| u128::from(ns)).sum::<u128>() / BURST as u128)
        .collect();
    calls.truncate(samples);
    Ok((
        median(calls.into_iter().map(u128::from).collect()),
        median(per_burst),
    ))
}

/// Runs the trusted bench guest once more under the observer, `samples` launches a pattern.
pub async fn measure(runtime: &Runtime, bench_guest: &Guest, samples: usize) -> Result<HostTime> {
    let seen = Arc::new(CallSamples::default());
    let observer: Arc<dyn CallObserver> = seen.clone();
    let run = run_bench_guest(
        runtime,
        bench_guest,
        &[&samples.to_string()],
        Limits::default(),
        Some(observer),
    )
    .await?;
    let total = |name: &str| run.field(name).ok_or_else(|| run.unexpected(name));
    let take =
        |m: &Mutex<Vec<u64>>| std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner()));
    let (launch_alone, launch_burst) = split(take(&seen.launch), samples)?;
    let (bound_alone, bound_burst) = split(take(&seen.enqueue), samples)?;
    Ok(HostTime {
        launch: Split {
            alone: (total("launch_ns")?, launch_alone),
            burst: (total("burst_ns")?, launch_burst),
        },
        bound: Split {
            alone: (total("bound_launch_ns")?, bound_alone),
            burst: (total("bound_burst_ns")?, bound_burst),
        },
    })
}

impl HostTime {
    /// The markdown table: each path's whole launch, its host part and the rest.
    pub fn markdown(&self) -> String {
        let us = |ns: u128| ns as f64 / 1e3;
        let mut s = String::from(
            "| guest launch (observed pass) | whole, guest clock | inside the host call | guest side + crossing |\n|---|---|---|---|\n",
        );
        for (what, (total, host)) in [
            ("launch, alone on an idle stream", self.launch.alone),
            (&format!("launch, in bursts of {BURST}"), self.launch.burst),
            ("bound launch, alone on an idle stream", self.bound.alone),
            (
                &format!("bound launch, in bursts of {BURST}"),
                self.bound.burst,
            ),
        ] {
            s += &format!(
                "| {what} | {:.2} µs | {:.2} µs | {:.2} µs |\n",
                us(total),
                us(host),
                us(total.saturating_sub(host))
            );
        }
        s
    }

    /// The JSON field's value: `{"launch":{"alone_ns":[total,host],"burst_ns":[…]},"bound":…}`.
    pub fn json(&self) -> String {
        let split = |s: Split| {
            format!(
                "{{\"alone_ns\":[{},{}],\"burst_ns\":[{},{}]}}",
                s.alone.0, s.alone.1, s.burst.0, s.burst.1
            )
        };
        format!(
            "{{\"launch\":{},\"bound\":{}}}",
            split(self.launch),
            split(self.bound)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_takes_the_lone_launches_first_and_each_burst_as_its_mean_call() {
        let samples = 3;
        // Three lone calls of 10, 30, 20 ns, then one burst of BURST calls: 5 ns each but its
        // last, which issued the batch in 5 + 32 × 10 ns.
        let mut calls = vec![10, 30, 20];
        calls.extend(std::iter::repeat_n(5, BURST - 1));
        calls.push(5 + 32 * 10);
        assert_eq!(split(calls, samples).unwrap(), (20, 15));
    }

    #[test]
    fn split_refuses_a_call_count_the_bench_guest_would_not_make() {
        let err = split(vec![1; 4], 3).unwrap_err().to_string();
        assert!(err.contains("4 launch calls"), "{err}");
    }

    #[test]
    fn the_table_gives_the_guest_side_as_the_whole_less_the_host_part() {
        let t = HostTime {
            launch: Split {
                alone: (5000, 3000),
                burst: (1000, 800),
            },
            bound: Split {
                alone: (4000, 3500),
                burst: (700, 600),
            },
        };
        let md = t.markdown();
        assert!(
            md.contains("| launch, alone on an idle stream | 5.00 µs | 3.00 µs | 2.00 µs |"),
            "{md}"
        );
        assert!(
            md.contains("| bound launch, in bursts of 32 | 0.70 µs | 0.60 µs | 0.10 µs |"),
            "{md}"
        );
        assert!(
            t.json()
                .starts_with("{\"launch\":{\"alone_ns\":[5000,3000]")
        );
    }
}
