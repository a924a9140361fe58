//! `gpuhost bench`: the same trivial kernel through the raw driver API and through gpuhost, side
//! by side in one run — launch issue cost, launch→completion, bind-on-entry, swap time and
//! in-flight request latency with and without swaps — and device↔host transfers beside the
//! machine's raw pageable and pinned bandwidth, with a sweep of staging configurations. Prints a markdown table; `--json` writes
//! the numbers. `--quick` runs few iterations (CI on softcuda).

mod arena;
mod awaits;
mod bursts;
mod guest;
mod guest_pass;
mod guest_vs_native;
mod host_time;
mod native_http;
mod paired;
mod raw;
mod stats;
mod swap;
mod transfer;

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use gpuhost::{Arg, Completion, LaunchConfig, ModuleImage, ModuleSource, Registry};

use stats::{Summary, block_on, block_on_spin};

/// The bench kernels: the stamp bundles' PTX (noop for launches, stamp for requests).
const PTX_A: &str = include_str!("../../../gpuhost/bundles/stamp-a/stamp.ptx");
const PTX_B: &str = include_str!("../../../gpuhost/bundles/stamp-b/stamp.ptx");

/// Options of `gpuhost bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Few iterations (for softcuda / CI).
    #[arg(long)]
    quick: bool,
    /// Write all numbers as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Number of swaps for the swap benchmark (default 20, 5 with --quick).
    #[arg(long)]
    swaps: Option<usize>,
    /// Instead: a WebAssembly guest's launch and round trip against native gpuhost's.
    #[arg(long)]
    guest: bool,
    /// Instead: bursts of 32 launches then synchronize, per kernel, through the raw driver
    /// (stream and graph), native gpuhost (stream and KernelGraph) and a trusted guest with
    /// graph batching off and on (also printed by --guest).
    #[arg(long)]
    bursts: bool,
    /// Instead: serve the native HTTP baseline of scripts/bench-serve.sh on this address
    /// (GET /stamp does the http-stamp function's GPU work in process) until SIGTERM.
    #[arg(long, value_name = "ADDR")]
    native_http: Option<String>,
    /// The bundle holding `stamp` for --native-http.
    #[arg(long, default_value = "crates/gpuhost/bundles/stamp-a")]
    bundle: PathBuf,
}

struct Plan {
    launches: usize,
    batch: usize,
    syncs: usize,
    binds: usize,
    swaps: usize,
    steady_ms: u64,
    workers: usize,
    /// Transfer sizes in bytes, and repetitions of each.
    transfer_sizes: Vec<usize>,
    transfer_reps: usize,
    /// Staging configurations swept at the largest transfer size, and repetitions of each.
    transfer_sweep: Vec<gpuhost::TransferConfig>,
    sweep_reps: usize,
}

/// Everything measured, in the units the names say.
#[derive(serde::Serialize)]
struct Results {
    unix_time: u64,
    driver: String,
    driver_version: i32,
    device: String,
    compute_capability: String,
    commit: Option<String>,
    quick: bool,
    launch_issue_ns_raw: Summary,
    launch_issue_ns_gpuhost: Summary,
    /// Issue cost of launches at position ≥ LATE in their batch (gpuhost has recorded an event
    /// at 256 and its completion thread is querying it meanwhile), raw and gpuhost.
    launch_issue_late_ns_raw: Summary,
    /// Raw launch preceded by gpuhost's bind on entry (Host::enter): a diagnostic.
    launch_issue_ns_raw_plus_enter: Summary,
    launch_issue_late_ns_gpuhost: Summary,
    launch_sync_us_raw: Summary,
    launch_wait_us_gpuhost: Summary,
    launch_await_us_gpuhost: Summary,
    launch_await_spin_us_gpuhost: Summary,
    bind_ns_ctx_get_current: Summary,
    /// cuCtxGetId(NULL) alone: the one driver call of `Host::enter`'s usual path.
    bind_ns_ctx_get_id: Summary,
    bind_ns_host_enter: Summary,
    /// The host's default `.await` spin budget, µs, used by the rows above.
    await_spin_default_us: f64,
    /// `.await` under each spin budget, parking and yielding executors.
    await_spin: Vec<awaits::AwaitSpin>,
    swap: swap::SwapResults,
    transfers: transfer::TransferResults,
    arena_alloc: arena::AllocResult,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(addr) = &args.native_http {
        return native_http::run(addr, args.bundle.clone(), args.device);
    }
    if args.guest || args.bursts {
        let samples = if args.quick { 500 } else { 20_000 };
        let json = if args.guest {
            guest::run(args.device, samples)?
        } else {
            guest::run_bursts(args.device, samples)?
        };
        if let Some(path) = &args.json {
            std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }
    let mut plan = if args.quick {
        Plan {
            launches: 2_000,
            batch: 200,
            syncs: 200,
            binds: 200,
            swaps: 5,
            steady_ms: 500,
            workers: 2,
            transfer_sizes: vec![64 << 10, 4 << 20],
            transfer_reps: 5,
            transfer_sweep: transfer::sweep_configs(true),
            sweep_reps: 2,
        }
    } else {
        Plan {
            launches: 100_000,
            batch: 500,
            syncs: 5_000,
            binds: 2_000,
            swaps: 20,
            steady_ms: 3_000,
            workers: 4,
            transfer_sizes: vec![64 << 10, 4 << 20, 64 << 20],
            transfer_reps: 30,
            transfer_sweep: transfer::sweep_configs(false),
            sweep_reps: 10,
        }
    };
    if let Some(n) = args.swaps {
        plan.swaps = n;
    }
    let results = measure(&plan, args.device, args.quick)?;
    print_table(&results);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Run every benchmark of `plan` on device `ordinal`.
fn measure(plan: &Plan, ordinal: usize, quick: bool) -> Result<Results> {
    let info = gpuhost::driver()?;
    let host = gpuhost::host(ordinal)?;
    let f = host.facts().clone();
    eprintln!(
        "bench on {} ({}, driver {} {})",
        f.name,
        f.sm_tag(),
        info.kind,
        info.version
    );
    let reg = Registry::from_sources(
        &host,
        "bench-a",
        vec![ModuleSource::new("stamp", ModuleImage::Ptx(PTX_A.into()))],
    )?;
    let noop = reg.kernel_labeled("noop", "bench")?;
    let stream = host.stream()?;
    host.enter()?;
    let raw = raw::Raw::new(PTX_A, "noop")?;
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };

    // Launch issue cost: each launch timed alone; the queue drained between batches (untimed).
    // Raw and gpuhost batches alternate (round 0 is warm-up), so both see the same clocks and
    // driver state instead of one running entirely before the other.
    let batch = |launch: &mut dyn FnMut() -> Result<()>,
                 drain: &mut dyn FnMut() -> Result<()>,
                 keep: bool,
                 v: &mut Vec<f64>|
     -> Result<()> {
        for _ in 0..plan.batch {
            let t = Instant::now();
            launch()?;
            if keep {
                v.push(t.elapsed().as_nanos() as f64);
            }
        }
        drain()
    };
    // Completions are kept (not dropped) inside the timed region, as a caller would hold them.
    let pending = std::cell::RefCell::new(Vec::<Completion>::with_capacity(plan.batch));
    let mut gh_launch = || -> Result<()> {
        let c = stream.launch(&noop, cfg, &[Arg::U32(1)])?;
        pending.borrow_mut().push(c);
        Ok(())
    };
    let mut gh_drain = || -> Result<()> {
        stream.synchronize()?;
        for c in pending.borrow_mut().drain(..) {
            c.wait()?;
        }
        Ok(())
    };
    // Diagnostic: the raw launch plus gpuhost's bind on entry, to attribute the difference.
    let mut raw_enter = || -> Result<()> {
        host.enter()?;
        raw.launch(1)
    };
    let (mut raw_issue, mut gh_issue, mut raw_enter_issue) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..(plan.launches / plan.batch + 1) {
        let keep = round > 0;
        batch(
            &mut raw_enter,
            &mut || raw.sync(),
            keep,
            &mut raw_enter_issue,
        )?;
        let mut raw_batch = || {
            batch(
                &mut || raw.launch(1),
                &mut || raw.sync(),
                keep,
                &mut raw_issue,
            )
        };
        let mut gh_batch = || batch(&mut gh_launch, &mut gh_drain, keep, &mut gh_issue);
        if round % 2 == 0 {
            raw_batch()?;
            gh_batch()?;
        } else {
            gh_batch()?;
            raw_batch()?;
        }
    }

    // Launch → completion: the variants run in alternating chunks, after a warm-up of each.
    let mut variants: [&mut dyn FnMut() -> Result<()>; 4] = [
        &mut || {
            raw.launch(1)?;
            raw.sync()
        },
        &mut || Ok(stream.launch(&noop, cfg, &[Arg::U32(1)])?.wait()?),
        &mut || Ok(block_on(stream.launch(&noop, cfg, &[Arg::U32(1)])?)?),
        &mut || Ok(block_on_spin(stream.launch(&noop, cfg, &[Arg::U32(1)])?)?),
    ];
    let mut lat: [Vec<f64>; 4] = Default::default();
    for f in variants.iter_mut() {
        for _ in 0..(plan.syncs / 10).max(10) {
            f()?;
        }
    }
    let chunk = plan.syncs.clamp(1, 50);
    while lat[0].len() < plan.syncs {
        let k = chunk.min(plan.syncs - lat[0].len());
        for (f, v) in variants.iter_mut().zip(lat.iter_mut()) {
            for _ in 0..k {
                let t = Instant::now();
                f()?;
                v.push(t.elapsed().as_nanos() as f64 / 1000.0);
            }
        }
    }
    let [raw_sync, gh_wait, gh_await, gh_await_spin] = lat;

    // Bind on entry: 1000 calls per sample.
    let per_call = |f: &mut dyn FnMut() -> Result<()>| -> Result<Vec<f64>> {
        let mut v = Vec::with_capacity(plan.binds);
        for i in 0..plan.binds + 10 {
            let t = Instant::now();
            for _ in 0..1000 {
                f()?;
            }
            if i >= 10 {
                v.push(t.elapsed().as_nanos() as f64 / 1000.0);
            }
        }
        Ok(v)
    };
    let bind_raw = per_call(&mut raw::ctx_get_current)?;
    let bind_raw_id = per_call(&mut raw::ctx_get_id)?;
    let bind_host = per_call(&mut || Ok(host.enter().map(|_| ())?))?;
    let await_spin_default = host.await_spin();
    let await_spin = awaits::run(&host, &stream, &noop, &raw, plan.syncs)?;
    drop(raw);
    drop(noop);

    let swap = swap::run(
        &host,
        reg,
        PTX_A,
        PTX_B,
        plan.swaps,
        plan.steady_ms,
        plan.workers,
    )
    .context("swap benchmark")?;
    let transfers = transfer::run(
        &host,
        &plan.transfer_sizes,
        plan.transfer_reps,
        &plan.transfer_sweep,
        plan.sweep_reps,
    )
    .context("transfer benchmark")?;

    let arena_alloc = arena::run(&host, 64 << 10, if quick { 50 } else { 2_000 })
        .context("arena allocation benchmark")?;

    let results = Results {
        unix_time: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        driver: info.kind.to_string(),
        driver_version: info.version,
        device: f.name.clone(),
        compute_capability: f.sm_tag(),
        commit: std::env::var("GPUHOST_COMMIT").ok(),
        quick,
        launch_issue_late_ns_raw: Summary::of(late(&raw_issue, plan.batch)),
        launch_issue_ns_raw_plus_enter: Summary::of(raw_enter_issue),
        launch_issue_ns_raw: Summary::of(raw_issue),
        launch_issue_late_ns_gpuhost: Summary::of(late(&gh_issue, plan.batch)),
        launch_issue_ns_gpuhost: Summary::of(gh_issue),
        launch_sync_us_raw: Summary::of(raw_sync),
        launch_wait_us_gpuhost: Summary::of(gh_wait),
        launch_await_us_gpuhost: Summary::of(gh_await),
        launch_await_spin_us_gpuhost: Summary::of(gh_await_spin),
        bind_ns_ctx_get_current: Summary::of(bind_raw),
        bind_ns_ctx_get_id: Summary::of(bind_raw_id),
        bind_ns_host_enter: Summary::of(bind_host),
        await_spin_default_us: await_spin_default.as_secs_f64() * 1e6,
        await_spin,
        swap,
        transfers,
        arena_alloc,
    };
    Ok(results)
}

/// Position in a batch from which gpuhost's launching thread has recorded a completion event.
const LATE: usize = 256;

/// The samples at position ≥ LATE of each batch of `batch`.
fn late(v: &[f64], batch: usize) -> Vec<f64> {
    v.iter()
        .enumerate()
        .filter(|(i, _)| i % batch >= LATE)
        .map(|(_, x)| *x)
        .collect()
}

fn print_table(r: &Results) {
    let row = |metric: &str, raw: f64, gh: f64, goal: &str| {
        println!(
            "| {metric} | {raw:.2} | {gh:.2} | {:.3}× | {goal} |",
            gh / raw
        );
    };
    println!(
        "\ndevice: {} ({}), driver: {} {}{}\n",
        r.device,
        r.compute_capability,
        r.driver,
        r.driver_version,
        if r.quick { ", --quick" } else { "" }
    );
    println!("| metric (median) | raw driver | gpuhost | ratio | goal |");
    println!("|---|---:|---:|---:|---|");
    row(
        "launch issue, ns",
        r.launch_issue_ns_raw.median,
        r.launch_issue_ns_gpuhost.median,
        "≤ 1.05×",
    );
    row(
        "launch issue, ns (diagnostic, raw: + Host::enter)",
        r.launch_issue_ns_raw.median,
        r.launch_issue_ns_raw_plus_enter.median,
        "—",
    );
    row(
        "launch issue at batch position ≥ 256, ns",
        r.launch_issue_late_ns_raw.median,
        r.launch_issue_late_ns_gpuhost.median,
        "—",
    );
    row(
        "launch → wait, µs (raw: + cuStreamSynchronize)",
        r.launch_sync_us_raw.median,
        r.launch_wait_us_gpuhost.median,
        "≤ 1.2×",
    );
    row(
        "launch → .await, parking executor (block_on), µs (raw: + cuStreamSynchronize)",
        r.launch_sync_us_raw.median,
        r.launch_await_us_gpuhost.median,
        "≤ 1.3×",
    );
    row(
        "launch → .await (yielding executor), µs (raw: + cuStreamSynchronize)",
        r.launch_sync_us_raw.median,
        r.launch_await_spin_us_gpuhost.median,
        "≤ 1.1×",
    );
    row(
        "bind on entry, ns (raw: cuCtxGetCurrent)",
        r.bind_ns_ctx_get_current.median,
        r.bind_ns_host_enter.median,
        "—",
    );
    row(
        "bind on entry, ns (raw: cuCtxGetId(NULL), the identity check's one call)",
        r.bind_ns_ctx_get_id.median,
        r.bind_ns_host_enter.median,
        "—",
    );
    row(
        &format!(
            "zeroed {} KiB alloc + free, µs (raw: cuMemAlloc + cuMemsetD8 + sync + cuMemFree; gpuhost: Arena)",
            r.arena_alloc.bytes >> 10
        ),
        r.arena_alloc.alloc_free_us_raw.median,
        r.arena_alloc.alloc_free_us_arena.median,
        "—",
    );
    awaits::print(
        &r.await_spin,
        std::time::Duration::from_secs_f64(r.await_spin_default_us / 1e6),
    );
    let s = &r.swap;
    println!();
    println!("| swap metric | value |");
    println!("|---|---:|");
    println!("| swaps | {} |", s.swaps);
    println!(
        "| swap (publish + drain + release), ms median | {:.3} |",
        s.swap_ms.median
    );
    println!("| swap, ms p99 | {:.3} |", s.swap_ms.p99);
    println!(
        "| registry load (PTX JIT), ms median | {:.3} |",
        s.load_ms.median
    );
    println!(
        "| request latency without swaps, µs p50 / p99 | {:.1} / {:.1} |",
        s.steady_us.median, s.steady_us.p99
    );
    println!(
        "| request latency during swaps, µs p50 / p99 | {:.1} / {:.1} |",
        s.swapping_us.median, s.swapping_us.p99
    );
    println!(
        "| p99 ratio (during / without) | {:.3}× |",
        s.swapping_us.p99 / s.steady_us.p99
    );
    println!(
        "| requests without / during swaps | {} / {} |",
        s.steady_us.n, s.swapping_us.n
    );
    println!("| failed requests | {} |", s.failed);
    transfer::print(&r.transfers);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole bench at a tiny size, on whatever driver is present (softcuda in CI).
    #[test]
    fn a_tiny_bench_measures_every_metric_without_failures() {
        if let Err(gpuhost::Error::NoDriver { reason }) = gpuhost::host(0) {
            println!("skipped: no driver ({reason})");
            return;
        }
        let plan = Plan {
            launches: 40,
            batch: 20,
            syncs: 20,
            binds: 5,
            swaps: 2,
            steady_ms: 50,
            workers: 1,
            transfer_sizes: vec![100, (1 << 20) + 3],
            transfer_reps: 2,
            transfer_sweep: transfer::sweep_configs(true),
            sweep_reps: 1,
        };
        let r = measure(&plan, 0, true).unwrap();
        assert_eq!(r.launch_issue_ns_raw.n, 40);
        assert_eq!(r.launch_issue_ns_gpuhost.n, 40);
        assert_eq!(r.launch_wait_us_gpuhost.n, 20);
        assert_eq!(r.bind_ns_host_enter.n, 5);
        assert_eq!(r.bind_ns_ctx_get_id.n, 5);
        for m in [
            r.launch_issue_ns_gpuhost,
            r.launch_sync_us_raw,
            r.launch_await_us_gpuhost,
            r.launch_await_spin_us_gpuhost,
        ] {
            assert!(m.median > 0.0 && m.median.is_finite(), "{m:?}");
        }
        assert_eq!((r.swap.swaps, r.swap.failed, r.swap.retired), (2, 0, 0));
        assert!(r.swap.steady_us.n > 0 && r.swap.swapping_us.n > 0);
        assert_eq!(r.await_spin.len(), awaits::BUDGETS_US.len());
        assert!(
            r.await_spin
                .iter()
                .all(|a| a.parking_us.n == 20 && a.yielding_us.n == 20)
        );
        assert_eq!(r.transfers.sizes.len(), 2);
        for t in &r.transfers.sizes {
            assert_eq!((t.download_us_gpuhost.n, t.upload_us_raw.n), (2, 2));
            assert_eq!(
                (t.download_us_raw_pinned.n, t.upload_us_host_buffer.n),
                (2, 2)
            );
        }
        let a = &r.arena_alloc;
        assert_eq!((a.alloc_free_us_raw.n, a.alloc_free_us_arena.n), (50, 50));
        assert!(a.alloc_free_us_arena.median.is_finite());
        let sweep = &r.transfers.sweep;
        assert_eq!(sweep.len(), transfer::sweep_configs(true).len());
        assert!(sweep.iter().any(|s| s.is_default), "the default is swept");
        assert!(
            sweep
                .iter()
                .all(|s| s.download_us.n == 1 && s.bytes == (1 << 20) + 3)
        );
        let json = serde_json::to_string(&r).unwrap();
        for key in [
            "launch_issue_ns_raw",
            "download_us_raw_pinned",
            "upload_us_host_buffer",
            "sweep",
        ] {
            assert!(json.contains(&format!("\"{key}\"")), "{key} in the JSON");
        }
    }
}
