//! Guest vs native launch benchmark, side by side in one run on one device: the cost of
//! enqueuing a launch of an empty kernel (alone onto an idle stream, and within a burst of
//! back-to-back launches), and the launch → synchronize round trip. The guest is
//! examples/guests/misbehave in `bench` mode (it times itself with the WASI monotonic clock);
//! native is the same kernel, arguments, geometry and timing pattern through gpuhost directly.

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
    /// Native gpuhost: `Stream::launch` alone, onto an idle stream.
    pub native_launch_ns: u128,
    /// Native gpuhost: one `Stream::launch` within a burst of [`BURST`].
    pub native_burst_ns: u128,
    /// Native gpuhost: launch + awaiting its Completion.
    pub native_roundtrip_ns: u128,
    /// Guest: `stream.launch` alone onto an idle stream, seen from inside the guest (this
    /// includes one WASI clock read, [`Self::guest_clock_ns`]).
    pub guest_launch_ns: u128,
    /// Guest: one `stream.launch` within a burst of [`BURST`] (timed per burst).
    pub guest_burst_ns: u128,
    /// Guest: one `stream.enqueue` of a bound launch (same kernel, arguments and geometry)
    /// within a burst of [`BURST`].
    pub guest_bound_ns: u128,
    /// Guest: `stream.launch` + `stream.synchronize`.
    pub guest_roundtrip_ns: u128,
    /// Guest: a pair of WASI monotonic clock reads (what timing one launch adds to it).
    pub guest_clock_ns: u128,
    /// Guest: the bare import round trip (`buffer.len`).
    pub guest_import_ns: u128,
}

/// Launches per burst, on both sides (the guest's `BURST` is the same).
pub const BURST: usize = 32;

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
            "guest vs native on {}, {} samples, medians:\n\n| measure | native gpuhost | wasm guest | guest / native |\n|---|---|---|---|\n{}{}{}{}\nguest clock read pair {} ns, bare import round trip {} ns\n",
            self.device,
            self.samples,
            row(
                "launch cost, alone on an idle stream",
                self.native_launch_ns,
                self.guest_launch_ns
            ),
            row(
                &format!("launch cost, in bursts of {BURST}"),
                self.native_burst_ns,
                self.guest_burst_ns
            ),
            row(
                &format!("bound launch enqueued, in bursts of {BURST}"),
                self.native_burst_ns,
                self.guest_bound_ns
            ),
            row(
                "launch → synchronize round trip",
                self.native_roundtrip_ns,
                self.guest_roundtrip_ns
            ),
            self.guest_clock_ns,
            self.guest_import_ns,
        )
    }

    /// One JSON object with the medians and ratios.
    pub fn json(&self) -> String {
        format!(
            "{{\"device\":{:?},\"samples\":{},\"native_launch_ns\":{},\"guest_launch_ns\":{},\"launch_ratio\":{:.3},\"native_burst_ns\":{},\"guest_burst_ns\":{},\"burst_ratio\":{:.3},\"guest_bound_ns\":{},\"bound_ratio\":{:.3},\"guest_clock_ns\":{},\"guest_import_ns\":{},\"native_roundtrip_ns\":{},\"guest_roundtrip_ns\":{},\"roundtrip_ratio\":{:.3}}}",
            self.device,
            self.samples,
            self.native_launch_ns,
            self.guest_launch_ns,
            ratio(self.guest_launch_ns, self.native_launch_ns),
            self.native_burst_ns,
            self.guest_burst_ns,
            ratio(self.guest_burst_ns, self.native_burst_ns),
            self.guest_bound_ns,
            ratio(self.guest_bound_ns, self.native_burst_ns),
            self.guest_clock_ns,
            self.guest_import_ns,
            self.native_roundtrip_ns,
            self.guest_roundtrip_ns,
            ratio(self.guest_roundtrip_ns, self.native_roundtrip_ns)
        )
    }
}

/// Native samples, in nanoseconds.
#[derive(Default)]
struct NativeSamples {
    launch: Vec<u128>,
    burst: Vec<u128>,
    round: Vec<u128>,
}

/// `count` native launches of the empty kernel onto an idle stream (each timed alone, then
/// awaited), then `count / BURST` bursts of back-to-back launches timed per burst.
async fn native_pass(
    stream: &gpuhost::Stream,
    kernel: &gpuhost::Kernel,
    buf: &gpuhost::DeviceBuffer,
    count: usize,
    into: &mut NativeSamples,
) -> gpuhost::Result<()> {
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let launch = || stream.launch(kernel, cfg, &[Arg::Buffer(buf, 0), Arg::U32(256)]);
    for _ in 0..count {
        let t0 = Instant::now();
        let done = launch()?;
        into.launch.push(t0.elapsed().as_nanos());
        done.await?;
        into.round.push(t0.elapsed().as_nanos());
    }
    let mut burst = Vec::with_capacity(BURST);
    for _ in 0..count.div_ceil(BURST) {
        let t0 = Instant::now();
        for _ in 0..BURST {
            burst.push(launch()?);
        }
        into.burst.push(t0.elapsed().as_nanos() / BURST as u128);
        for done in burst.drain(..) {
            done.await?;
        }
    }
    Ok(())
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
    // Warm up, then measure native half before and half after the guest, so neither side gets
    // the machine in a better state.
    native_pass(
        &stream,
        &kernel,
        &buf,
        samples / 10 + 1,
        &mut NativeSamples::default(),
    )
    .await?;
    let mut native = NativeSamples::default();
    native_pass(&stream, &kernel, &buf, samples.div_ceil(2), &mut native).await?;
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
    native_pass(&stream, &kernel, &buf, samples / 2, &mut native).await?;
    let guest = [
        "launch_ns",
        "burst_ns",
        "bound_ns",
        "roundtrip_ns",
        "clock_ns",
        "import_ns",
    ];
    let [
        Some(launch),
        Some(burst),
        Some(bound),
        Some(round),
        Some(clock),
        Some(import),
    ] = guest.map(field)
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
        native_launch_ns: median(native.launch),
        native_burst_ns: median(native.burst),
        native_roundtrip_ns: median(native.round),
        guest_launch_ns: launch,
        guest_burst_ns: burst,
        guest_bound_ns: bound,
        guest_roundtrip_ns: round,
        guest_clock_ns: clock,
        guest_import_ns: import,
    })
}
