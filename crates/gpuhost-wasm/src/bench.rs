//! Guest vs native launch benchmark, side by side in one run on one device: the cost of
//! enqueuing one launch of an empty kernel, and the launch → synchronize round trip. The guest is
//! examples/guests/misbehave in `bench` mode (it times itself with the WASI monotonic clock);
//! native is the same kernel, arguments and geometry through gpuhost directly.

use std::time::Instant;

use gpuhost::{Arg, LaunchConfig, ModuleImage, ModuleSource, Registry};

use crate::error::Error;
use crate::runtime::{Guest, RunOptions, Runtime};

/// The empty kernel both sides launch (the guest embeds the same file).
const NOOP_PTX: &str = include_str!("../../../examples/guests/kernels/noop.ptx");

/// Medians in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchBench {
    /// Samples per measure.
    pub samples: usize,
    /// Device name.
    pub device: String,
    /// Native gpuhost: `Stream::launch` alone.
    pub native_launch_ns: u128,
    /// Native gpuhost: launch + awaiting its Completion.
    pub native_roundtrip_ns: u128,
    /// Guest: `stream.launch` alone, seen from inside the guest.
    pub guest_launch_ns: u128,
    /// Guest: `stream.launch` + `stream.synchronize`.
    pub guest_roundtrip_ns: u128,
}

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn ratio(guest: u128, native: u128) -> f64 {
    guest as f64 / native.max(1) as f64
}

impl LaunchBench {
    /// A markdown table (for bench/RESULTS.md).
    pub fn markdown(&self) -> String {
        let row = |what: &str, native: u128, guest: u128| {
            format!(
                "| {what} | {:.2} µs | {:.2} µs | {:.2}× |\n",
                native as f64 / 1e3,
                guest as f64 / 1e3,
                ratio(guest, native)
            )
        };
        format!(
            "guest vs native on {}, {} samples, medians:\n\n| measure | native gpuhost | wasm guest | guest / native |\n|---|---|---|---|\n{}{}",
            self.device,
            self.samples,
            row(
                "launch (enqueue) cost",
                self.native_launch_ns,
                self.guest_launch_ns
            ),
            row(
                "launch → synchronize round trip",
                self.native_roundtrip_ns,
                self.guest_roundtrip_ns
            ),
        )
    }

    /// One JSON object with the medians and ratios.
    pub fn json(&self) -> String {
        format!(
            "{{\"device\":{:?},\"samples\":{},\"native_launch_ns\":{},\"guest_launch_ns\":{},\"launch_ratio\":{:.3},\"native_roundtrip_ns\":{},\"guest_roundtrip_ns\":{},\"roundtrip_ratio\":{:.3}}}",
            self.device,
            self.samples,
            self.native_launch_ns,
            self.guest_launch_ns,
            ratio(self.guest_launch_ns, self.native_launch_ns),
            self.native_roundtrip_ns,
            self.guest_roundtrip_ns,
            ratio(self.guest_roundtrip_ns, self.native_roundtrip_ns)
        )
    }
}

/// `count` native launches of the empty kernel: (enqueue times, launch→completion times) in ns.
async fn native_pass(
    stream: &gpuhost::Stream,
    kernel: &gpuhost::Kernel,
    buf: &gpuhost::DeviceBuffer,
    count: usize,
) -> gpuhost::Result<(Vec<u128>, Vec<u128>)> {
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let (mut launch, mut round) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for _ in 0..count {
        let t0 = Instant::now();
        let done = stream.launch(kernel, cfg, &[Arg::Buffer(buf, 0), Arg::U32(256)])?;
        launch.push(t0.elapsed().as_nanos());
        done.await?;
        round.push(t0.elapsed().as_nanos());
    }
    Ok((launch, round))
}

/// Runs both sides, `samples` launches each. `bench_guest` is misbehave.wasm, loaded on `runtime`.
pub async fn guest_vs_native(
    runtime: &Runtime,
    bench_guest: &Guest,
    samples: usize,
) -> Result<LaunchBench, Error> {
    let samples = samples.max(1);
    let host = runtime.host();
    let source = ModuleSource::new("noop", ModuleImage::Ptx(NOOP_PTX.into()));
    let registry = Registry::from_sources(host, "bench", vec![source])?;
    let kernel = registry.kernel("noop")?;
    let buf = host.alloc(1024)?;
    let stream = host.stream()?;
    let pass = |count: usize| native_pass(&stream, &kernel, &buf, count);
    // Warm up, then measure native half before and half after the guest, so neither side gets
    // the machine in a better state.
    pass(samples / 10 + 1).await?;
    let (mut launch, mut round) = pass(samples.div_ceil(2)).await?;
    let args = vec!["misbehave".into(), "bench".into(), samples.to_string()];
    let out = runtime
        .run(
            bench_guest,
            RunOptions {
                args,
                ..RunOptions::default()
            },
        )
        .await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> Option<u128> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    let (launch_b, round_b) = pass(samples / 2).await?;
    launch.extend(launch_b);
    round.extend(round_b);
    let (Some(guest_launch_ns), Some(guest_roundtrip_ns)) =
        (field("launch_ns"), field("roundtrip_ns"))
    else {
        return Err(Error::Trap {
            reason: format!(
                "the bench guest printed {text:?} (stderr {:?}) instead of its timings",
                String::from_utf8_lossy(&out.stderr)
            ),
            out_of_fuel: false,
        });
    };
    Ok(LaunchBench {
        samples,
        device: host.facts().name.clone(),
        native_launch_ns: median(launch),
        native_roundtrip_ns: median(round),
        guest_launch_ns,
        guest_roundtrip_ns,
    })
}
