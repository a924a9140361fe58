//! `gpuhost bench --bursts` (also printed by `--guest`): bursts of [`BURST`] launches of the
//! empty kernel followed by a synchronize, per kernel, side by side in one run on one device —
//! the raw driver's stream launches and its replay of a 32-node graph (the anchors), native
//! gpuhost's `Stream::launch` and `KernelGraph` replay, and a guest's bursts, bound and with
//! argument lists, trusted and sandboxed, with graph batching off and on
//! (`Limits::max_graph_batch`; a sandboxed guest's batches hold at most 8 launches), and the
//! trusted guest's batched bursts again under other `max_graph_batch` values ([`BATCH_SWEEP`]:
//! a full batch is issued at once, so smaller batches let the device run one while the guest
//! collects the next). Each figure includes the synchronize: it is the time until the device
//! has run the burst, which is where a batched guest's last batch is issued.

use std::ffi::c_void;
use std::time::Instant;

use anyhow::{Result, bail};
use gpuhost::{Arg, GraphLaunch, KernelGraph, LaunchConfig, ModuleImage, ModuleSource, Registry};
use gpuhost_wasm::{Guest, Limits, Runtime};

use super::guest_pass::run_bench_guest;
use super::guest_vs_native::{BURST, median};
use super::raw::Raw;

/// The empty kernel every row launches (the guest embeds the same file).
const NOOP_PTX: &str = include_str!("../../../../examples/guests/kernels/noop.ptx");

/// The `max_graph_batch` values the trusted guest's batched bursts are measured again with.
pub const BATCH_SWEEP: [u32; 3] = [4, 16, 32];

/// Medians, nanoseconds per kernel, of a burst of [`BURST`] then synchronize, by path.
#[derive(Debug, Clone, Copy, Default)]
pub struct BurstBench {
    /// Bursts timed per row.
    pub bursts: usize,
    /// Raw `cuLaunchKernel` × BURST, `cuStreamSynchronize`.
    pub raw_stream: u128,
    /// Raw `cuGraphLaunch` of a BURST-node graph, `cuStreamSynchronize`.
    pub raw_graph: u128,
    /// gpuhost `Stream::launch` × BURST, `Stream::synchronize`.
    pub native_stream: u128,
    /// gpuhost `Stream::launch_graph` of a BURST-launch `KernelGraph`, `Stream::synchronize`.
    pub native_graph: u128,
    /// Trusted guest, `stream.enqueue` of a bound launch × BURST, `synchronize`: (off, on).
    pub guest_bound: (u128, u128),
    /// Trusted guest, `stream.launch` with its argument list × BURST, `synchronize`: (off, on).
    pub guest_launch: (u128, u128),
    /// The same two, sandboxed: (bound off, on), (argument list off, on).
    pub sandboxed_bound: (u128, u128),
    pub sandboxed_launch: (u128, u128),
    /// Trusted guest, graph-batched, at each of [`BATCH_SWEEP`]: (bound, argument list).
    pub batch_sweep: [(u128, u128); BATCH_SWEEP.len()],
}

/// Times `bursts` runs of `burst` (after one warm-up), per kernel.
fn time(bursts: usize, mut burst: impl FnMut() -> Result<()>) -> Result<u128> {
    burst()?;
    let mut per = Vec::with_capacity(bursts);
    for _ in 0..bursts {
        let t0 = Instant::now();
        burst()?;
        per.push(t0.elapsed().as_nanos() / BURST as u128);
    }
    Ok(median(per))
}

impl BurstBench {
    /// The markdown table.
    pub fn markdown(&self, device: &str) -> String {
        let rows = [
            ("raw driver, stream launches", self.raw_stream),
            ("raw driver, graph replay", self.raw_graph),
            ("native gpuhost, Stream::launch", self.native_stream),
            ("native gpuhost, KernelGraph replay", self.native_graph),
            ("guest bound launches, unbatched", self.guest_bound.0),
            ("guest bound launches, graph-batched", self.guest_bound.1),
            (
                "guest argument-list launches, unbatched",
                self.guest_launch.0,
            ),
            (
                "guest argument-list launches, graph-batched",
                self.guest_launch.1,
            ),
            (
                "sandboxed guest bound launches, unbatched",
                self.sandboxed_bound.0,
            ),
            (
                "sandboxed guest bound launches, graph-batched",
                self.sandboxed_bound.1,
            ),
            (
                "sandboxed guest argument-list launches, unbatched",
                self.sandboxed_launch.0,
            ),
            (
                "sandboxed guest argument-list launches, graph-batched",
                self.sandboxed_launch.1,
            ),
        ];
        let swept = BATCH_SWEEP
            .iter()
            .zip(self.batch_sweep)
            .flat_map(|(b, (bound, list))| {
                [
                    (format!("guest bound launches, batches of {b}"), bound),
                    (
                        format!("guest argument-list launches, batches of {b}"),
                        list,
                    ),
                ]
            });
        let rows = rows
            .into_iter()
            .map(|(w, ns)| (w.to_string(), ns))
            .chain(swept);
        let r = |a: u128, b: u128| a as f64 / b.max(1) as f64;
        let mut s = format!(
            "bursts of {BURST} launches then synchronize on {device}, {} bursts each, medians:\n\n| path | µs per kernel | / raw stream | / raw graph | / native gpuhost |\n|---|---|---|---|---|\n",
            self.bursts
        );
        for (what, ns) in rows {
            s += &format!(
                "| {what} | {:.3} | {:.2}× | {:.2}× | {:.2}× |\n",
                ns as f64 / 1e3,
                r(ns, self.raw_stream),
                r(ns, self.raw_graph),
                r(ns, self.native_stream)
            );
        }
        s
    }

    /// One JSON object of the medians (ns per kernel).
    pub fn json(&self) -> String {
        let swept: Vec<String> = BATCH_SWEEP
            .iter()
            .zip(self.batch_sweep)
            .map(|(b, (bound, list))| {
                format!("{{\"max_graph_batch\":{b},\"bound_ns\":{bound},\"launch_ns\":{list}}}")
            })
            .collect();
        format!(
            "{{\"burst\":{BURST},\"bursts\":{},\"raw_stream_ns\":{},\"raw_graph_ns\":{},\"native_stream_ns\":{},\"native_graph_ns\":{},\"guest_bound_ns\":{},\"guest_bound_batched_ns\":{},\"guest_launch_ns\":{},\"guest_launch_batched_ns\":{},\"sandboxed_bound_ns\":{},\"sandboxed_bound_batched_ns\":{},\"sandboxed_launch_ns\":{},\"sandboxed_launch_batched_ns\":{},\"batch_sweep\":[{}]}}",
            self.bursts,
            self.raw_stream,
            self.raw_graph,
            self.native_stream,
            self.native_graph,
            self.guest_bound.0,
            self.guest_bound.1,
            self.guest_launch.0,
            self.guest_launch.1,
            self.sandboxed_bound.0,
            self.sandboxed_bound.1,
            self.sandboxed_launch.0,
            self.sandboxed_launch.1,
            swept.join(",")
        )
    }
}

/// Measures every row, `samples` launches (`samples / BURST` bursts) each; `bench_guest` is
/// launchbench.wasm loaded on `runtime`.
pub async fn measure(runtime: &Runtime, bench_guest: &Guest, samples: usize) -> Result<BurstBench> {
    let bursts = samples.div_ceil(BURST).max(1);
    let host = runtime.host();
    let buf = host.alloc(1024)?;
    host.enter()?;
    let (mut ptr, mut n) = (buf.device_ptr(), 256u32);
    let mut params = [
        (&mut ptr as *mut u64).cast::<c_void>(),
        (&mut n as *mut u32).cast::<c_void>(),
    ];
    let raw = Raw::new(NOOP_PTX, "noop")?;
    let raw_stream = time(bursts, || {
        for _ in 0..BURST {
            raw.launch_params(&mut params)?;
        }
        raw.sync()
    })?;
    let graph = raw.graph(BURST, &mut params)?;
    let raw_graph = time(bursts, || {
        raw.launch_graph(&graph)?;
        raw.sync()
    })?;
    drop(graph);

    let source = ModuleSource::new("noop", ModuleImage::Ptx(NOOP_PTX.into()));
    let registry = Registry::from_sources(host, "bench-bursts", vec![source])?;
    let kernel = registry.kernel("noop")?;
    let stream = host.stream()?;
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let args = [Arg::Buffer(&buf, 0), Arg::U32(256)];
    let native_stream = time(bursts, || {
        for _ in 0..BURST {
            drop(stream.launch(&kernel, cfg, &args)?);
        }
        Ok(stream.synchronize()?)
    })?;
    let launches = vec![
        GraphLaunch {
            kernel: &kernel,
            cfg,
            args: &args,
        };
        BURST
    ];
    let mut kg = KernelGraph::new(&stream, &launches)?;
    let native_graph = time(bursts, || {
        drop(stream.launch_graph(&mut kg, &launches)?);
        Ok(stream.synchronize()?)
    })?;

    let batch = Limits::default().max_graph_batch;
    let off = guest_bursts(runtime, bench_guest, samples, false, 0).await?;
    let on = guest_bursts(runtime, bench_guest, samples, false, batch).await?;
    let sb_off = guest_bursts(runtime, bench_guest, samples, true, 0).await?;
    let sb_on = guest_bursts(runtime, bench_guest, samples, true, batch).await?;
    let mut batch_sweep = [(0, 0); BATCH_SWEEP.len()];
    for (row, &b) in batch_sweep.iter_mut().zip(&BATCH_SWEEP) {
        *row = guest_bursts(runtime, bench_guest, samples, false, b).await?;
    }
    Ok(BurstBench {
        bursts,
        raw_stream,
        raw_graph,
        native_stream,
        native_graph,
        guest_bound: (off.0, on.0),
        guest_launch: (off.1, on.1),
        sandboxed_bound: (sb_off.0, sb_on.0),
        sandboxed_launch: (sb_off.1, sb_on.1),
        batch_sweep,
    })
}

/// Runs `launchbench N bursts`, sandboxed or trusted, with `max_graph_batch`; returns (bound,
/// launch) ns.
async fn guest_bursts(
    runtime: &Runtime,
    bench_guest: &Guest,
    samples: usize,
    sandbox: bool,
    max_graph_batch: u32,
) -> Result<(u128, u128)> {
    let limits = Limits {
        sandbox,
        max_graph_batch,
        ..Limits::default()
    };
    let samples = samples.to_string();
    let run = run_bench_guest(runtime, bench_guest, &[&samples, "bursts"], limits, None).await?;
    let (Some(bound), Some(launch)) = (run.field("bound_ns"), run.field("launch_ns")) else {
        return Err(run.unexpected("its burst timings"));
    };
    if max_graph_batch > 0 && run.out.graph_launches == 0 {
        bail!("graph batching was on but the guest's bursts were not replayed as graphs");
    }
    Ok((bound, launch))
}
