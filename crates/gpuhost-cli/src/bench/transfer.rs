//! Transfer benchmark: device→host and host→device copies of a few sizes, alternating in one
//! run between the machine's own anchors — the raw driver's synchronous cuMemcpyDtoH/HtoD on
//! pageable memory (what a caller without gpuhost writes) and on page-locked memory from
//! cuMemAllocHost (the PCIe ceiling) — and gpuhost's `Stream::download_into` / `upload_from` (a
//! `HostBuffer`, no staging copy) and `Stream::download` / `upload` (pageable, staged). Then a
//! sweep of staging configurations for the pageable path at the largest size, best first, so one
//! run on a machine shows which defaults fit it. Medians; bandwidth ratios against the anchors.
//! Each sweep row also says where its time went (the host's staging counters: the host copy's
//! rate, the shares spent copying and awaiting DMAs, and any memory page-locked during its
//! rounds: a configuration measured after others may find the staging pool full of their chunk
//! sizes, which the count shows).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use gpuhost::{Host, TransferConfig, sys};

use super::raw::ok;
use super::stats::{Summary, block_on_spin};

/// One size's medians, in microseconds.
#[derive(serde::Serialize)]
pub struct TransferResult {
    pub bytes: usize,
    /// Raw driver, synchronous copy, pageable memory.
    pub download_us_raw: Summary,
    pub upload_us_raw: Summary,
    /// Raw driver, synchronous copy, page-locked memory from cuMemAllocHost.
    pub download_us_raw_pinned: Summary,
    pub upload_us_raw_pinned: Summary,
    /// gpuhost, pageable memory (staged), with the host's transfer configuration.
    pub download_us_gpuhost: Summary,
    pub upload_us_gpuhost: Summary,
    /// gpuhost, a HostBuffer (one DMA, no staging copy).
    pub download_us_host_buffer: Summary,
    pub upload_us_host_buffer: Summary,
}

/// One staging configuration of the sweep: the pageable path's medians at `bytes`.
#[derive(serde::Serialize)]
pub struct SweepResult {
    pub bytes: usize,
    pub chunk_bytes: usize,
    pub chunks_in_flight: usize,
    pub copy_threads: usize,
    pub streaming_stores: bool,
    pub copy_step_bytes: usize,
    pub is_default: bool,
    pub download_us: Summary,
    pub upload_us: Summary,
    /// Where the measured rounds' time went (the host's staging counters).
    pub download_stages: Stages,
    pub upload_stages: Stages,
}

/// A direction's staging figures over a configuration's rounds, from `HostStats`.
#[derive(serde::Serialize, Default, Clone, Copy)]
pub struct Stages {
    /// The host copy's rate while DMAs ran beside it: bytes staged over copy time.
    pub copy_gbs: f64,
    /// Share of the transfers' wall time spent awaiting a chunk's DMA.
    pub wait_share: f64,
    /// Share spent copying (the rest: enqueueing, taking staging, yields).
    pub copy_share: f64,
    /// Page-locked regions registered during the rounds (cuMemHostRegister, which on NVIDIA
    /// can wait for the device): staging the reserve did not cover.
    pub registrations: u64,
}

impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1}, {:.0}% / {:.0}%",
            self.copy_gbs,
            self.copy_share * 100.0,
            self.wait_share * 100.0
        )?;
        if self.registrations > 0 {
            write!(f, ", {} page-locked", self.registrations)?;
        }
        Ok(())
    }
}

/// Staging counters summed over rounds: bytes, copy ns, wait ns, and the rounds' wall time.
#[derive(Default)]
struct StageSum {
    bytes: u64,
    copy_ns: u64,
    wait_ns: u64,
    registrations: u64,
    wall: Duration,
}

impl StageSum {
    /// Adds one round, between the counters `before` and `after`, that took `wall`.
    fn add(&mut self, before: &gpuhost::HostStats, after: &gpuhost::HostStats, wall: Duration) {
        self.bytes += after.staged_bytes.saturating_sub(before.staged_bytes);
        self.copy_ns += after.staging_copy_ns.saturating_sub(before.staging_copy_ns);
        self.wait_ns += after.staging_wait_ns.saturating_sub(before.staging_wait_ns);
        self.registrations += after
            .pinned_registrations
            .saturating_sub(before.pinned_registrations);
        self.wall += wall;
    }

    fn stages(&self) -> Stages {
        let wall = self.wall.as_nanos().max(1) as f64;
        Stages {
            copy_gbs: if self.copy_ns > 0 {
                self.bytes as f64 / self.copy_ns as f64
            } else {
                0.0
            },
            wait_share: self.wait_ns as f64 / wall,
            copy_share: self.copy_ns as f64 / wall,
            registrations: self.registrations,
        }
    }
}

/// Everything the transfer benchmark measured.
#[derive(serde::Serialize)]
pub struct TransferResults {
    /// The host's configuration for the per-size measurements (the default).
    pub default_config: String,
    pub sizes: Vec<TransferResult>,
    /// Raw pinned medians at the sweep's size, measured beside the sweep (µs).
    pub sweep_anchor_download_us_raw_pinned: Summary,
    pub sweep_anchor_upload_us_raw_pinned: Summary,
    /// Best first (by download + upload median).
    pub sweep: Vec<SweepResult>,
}

/// Page-locked memory from cuMemAllocHost: the raw pinned anchor.
struct RawPinned {
    ptr: *mut u8,
    len: usize,
}

impl RawPinned {
    fn new(host: &Host, len: usize) -> Result<Self> {
        host.enter()?;
        let mut p = std::ptr::null_mut();
        // SAFETY: the host's context is bound on this thread; `p` is a valid out pointer.
        ok("cuMemAllocHost_v2", unsafe {
            sys::cuMemAllocHost_v2(&mut p, len.max(1))
        })?;
        Ok(Self { ptr: p.cast(), len })
    }
}

impl Drop for RawPinned {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAllocHost_v2 in new(); no copy uses it any more.
        let _ = unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
    }
}

/// A synchronous raw copy of `len` bytes between device address `dev` and host memory `h`.
fn raw_copy(host: &Host, down: bool, dev: u64, h: *mut u8, len: usize) -> Result<Duration> {
    host.enter()?;
    let t = Instant::now();
    let r = if down {
        // SAFETY: the context is bound; `h` holds `len` writable bytes, the device buffer at
        // `dev` too, both alive across the synchronous call.
        unsafe { sys::cuMemcpyDtoH_v2(h.cast(), dev, len) }
    } else {
        // SAFETY: as above, reading `h`.
        unsafe { sys::cuMemcpyHtoD_v2(dev, h.cast(), len) }
    };
    ok(
        if down {
            "cuMemcpyDtoH_v2"
        } else {
            "cuMemcpyHtoD_v2"
        },
        r,
    )?;
    Ok(t.elapsed())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn timed(f: impl FnOnce() -> gpuhost::Result<()>) -> Result<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

/// One transfer size: raw pageable and raw pinned copies, gpuhost's pageable path and a
/// `HostBuffer`, each way, `reps` rounds after a warm-up round, side by side.
pub fn measure(
    host: &Arc<Host>,
    stream: &gpuhost::Stream,
    bytes: usize,
    reps: usize,
) -> Result<TransferResult> {
    let buf = host.alloc(bytes)?;
    let mut data = vec![7u8; bytes];
    let pinned = RawPinned::new(host, bytes)?;
    let mut hb = host.host_buffer(bytes)?;
    let mut v: [Vec<f64>; 8] = Default::default();
    // Round 0 warms up (pools, page faults of `data`) and is not kept.
    for round in 0..=reps {
        let dev = buf.device_ptr();
        let t = [
            raw_copy(host, true, dev, data.as_mut_ptr(), bytes)?,
            raw_copy(host, false, dev, data.as_mut_ptr(), bytes)?,
            raw_copy(host, true, dev, pinned.ptr, pinned.len)?,
            raw_copy(host, false, dev, pinned.ptr, pinned.len)?,
            timed(|| block_on_spin(stream.download(&buf, 0, &mut data)))?,
            timed(|| block_on_spin(stream.upload(&buf, 0, &data)))?,
            timed(|| block_on_spin(stream.download_into(&buf, 0, &mut hb, 0..bytes)))?,
            timed(|| block_on_spin(stream.upload_from(&buf, 0, &hb, 0..bytes)))?,
        ];
        if round > 0 {
            for (v, t) in v.iter_mut().zip(t) {
                v.push(us(t));
            }
        }
    }
    let [dr, ur, drp, urp, dg, ug, dh, uh] = v.map(Summary::of);
    Ok(TransferResult {
        bytes,
        download_us_raw: dr,
        upload_us_raw: ur,
        download_us_raw_pinned: drp,
        upload_us_raw_pinned: urp,
        download_us_gpuhost: dg,
        upload_us_gpuhost: ug,
        download_us_host_buffer: dh,
        upload_us_host_buffer: uh,
    })
}

/// Measures each of `sizes` `reps` times a side, then sweeps `sweep` configurations at the
/// largest size `sweep_reps` times each.
pub fn run(
    host: &Arc<Host>,
    sizes: &[usize],
    reps: usize,
    sweep: &[TransferConfig],
    sweep_reps: usize,
) -> Result<TransferResults> {
    let stream = host.stream()?;
    let default = host.transfer_config();
    let mut out = Vec::new();
    for &bytes in sizes {
        out.push(measure(host, &stream, bytes, reps)?);
    }

    // The sweep, at the largest size: each configuration's rounds beside raw pinned rounds.
    let bytes = sizes.iter().copied().max().unwrap_or(0);
    let buf = host.alloc(bytes)?;
    let mut data = vec![7u8; bytes];
    let pinned = RawPinned::new(host, bytes)?;
    let (mut anchor_down, mut anchor_up) = (Vec::new(), Vec::new());
    let mut results = Vec::new();
    for cfg in sweep {
        host.set_transfer_config(*cfg)?;
        let (mut down, mut up) = (Vec::new(), Vec::new());
        // The staging counters over the kept rounds, each direction apart.
        let (mut down_stages, mut up_stages) = (StageSum::default(), StageSum::default());
        for round in 0..=sweep_reps {
            let before = host.stats();
            let d = timed(|| block_on_spin(stream.download(&buf, 0, &mut data)))?;
            let mid = host.stats();
            let u = timed(|| block_on_spin(stream.upload(&buf, 0, &data)))?;
            let after = host.stats();
            if round > 0 {
                down.push(us(d));
                up.push(us(u));
                down_stages.add(&before, &mid, d);
                up_stages.add(&mid, &after, u);
            }
        }
        anchor_down.push(us(raw_copy(
            host,
            true,
            buf.device_ptr(),
            pinned.ptr,
            bytes,
        )?));
        anchor_up.push(us(raw_copy(
            host,
            false,
            buf.device_ptr(),
            pinned.ptr,
            bytes,
        )?));
        results.push(SweepResult {
            bytes,
            chunk_bytes: cfg.chunk_bytes,
            chunks_in_flight: cfg.chunks_in_flight,
            copy_threads: cfg.copy_threads,
            streaming_stores: cfg.streaming_stores,
            copy_step_bytes: cfg.copy_step_bytes,
            is_default: *cfg == default,
            download_us: Summary::of(down),
            upload_us: Summary::of(up),
            download_stages: down_stages.stages(),
            upload_stages: up_stages.stages(),
        });
    }
    host.set_transfer_config(default)?;
    results.sort_by(|a, b| {
        (a.download_us.median + a.upload_us.median)
            .total_cmp(&(b.download_us.median + b.upload_us.median))
    });
    Ok(TransferResults {
        default_config: format!("{default:?}"),
        sizes: out,
        sweep_anchor_download_us_raw_pinned: Summary::of(anchor_down),
        sweep_anchor_upload_us_raw_pinned: Summary::of(anchor_up),
        sweep: results,
    })
}

/// The staging configurations `gpuhost bench` sweeps (a few with `quick`), the default included.
pub fn sweep_configs(quick: bool) -> Vec<TransferConfig> {
    let mut v = vec![TransferConfig::default()];
    let (chunks, flights, threads): (&[usize], &[usize], &[usize]) = if quick {
        (&[1 << 20], &[2], &[0, 2])
    } else {
        (
            &[1 << 20, 2 << 20, 4 << 20, 8 << 20],
            &[2, 3, 4],
            &[0, 2, 4, 6, 8, 12],
        )
    };
    // Streaming stores (copy.rs) with the shapes that won before, quick: the default's alone.
    let mut streaming = vec![TransferConfig {
        streaming_stores: true,
        ..TransferConfig::default()
    }];
    if !quick {
        for chunk_bytes in [4 << 20, 8 << 20, 16 << 20] {
            for copy_threads in [8, 12, 15] {
                streaming.push(TransferConfig {
                    chunk_bytes,
                    chunks_in_flight: 4,
                    copy_threads,
                    streaming_stores: true,
                    ..TransferConfig::default()
                });
            }
        }
    }
    let cached = chunks.iter().flat_map(|&chunk_bytes| {
        flights.iter().flat_map(move |&chunks_in_flight| {
            threads.iter().map(move |&copy_threads| TransferConfig {
                chunk_bytes,
                chunks_in_flight,
                copy_threads,
                streaming_stores: false,
                ..TransferConfig::default()
            })
        })
    });
    // Longer copy steps (fewer waits for a step's slowest thread) and deeper rings, at the
    // default's shape: a plain C pipeline with one step per chunk and 8 in flight moved 15%
    // more up than the default on an H100 (bench/RESULTS.md, session 50). Session 51: the
    // steps are not why; 8 in flight halved the upload here, which the C pipeline's did not.
    let mut steps = Vec::new();
    if !quick {
        for chunks_in_flight in [4, 8] {
            for copy_step_bytes in [256 << 10, 1 << 20, 8 << 20] {
                steps.push(TransferConfig {
                    chunks_in_flight,
                    copy_step_bytes,
                    ..TransferConfig::default()
                });
            }
        }
    }
    for c in cached.chain(streaming).chain(steps) {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

fn gbs(bytes: usize, us: f64) -> f64 {
    bytes as f64 / us / 1e3
}

/// Sweep rows printed: the best ones (and the default, wherever it ranks).
const SHOWN: usize = 12;

/// Markdown tables: per size and direction, every path's bandwidth with its ratios to the
/// raw anchors; then the sweep, best first.
pub fn print(r: &TransferResults) {
    println!(
        "\nTransfers (medians; bandwidth ratios: higher is better). gpuhost staging: {}",
        r.default_config
    );
    println!(
        "| transfer | raw pageable GB/s | raw pinned GB/s | path | gpuhost GB/s | × raw pinned | × raw pageable |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|");
    for s in &r.sizes {
        let size = size_name(s.bytes);
        for (dir, raw, pinned, paths) in [
            (
                "device → host",
                &s.download_us_raw,
                &s.download_us_raw_pinned,
                [
                    ("HostBuffer", &s.download_us_host_buffer),
                    ("pageable", &s.download_us_gpuhost),
                ],
            ),
            (
                "host → device",
                &s.upload_us_raw,
                &s.upload_us_raw_pinned,
                [
                    ("HostBuffer", &s.upload_us_host_buffer),
                    ("pageable", &s.upload_us_gpuhost),
                ],
            ),
        ] {
            for (path, gh) in paths {
                println!(
                    "| {dir}, {size} | {:.2} | {:.2} | {path} | {:.2} | {:.3}× | {:.3}× |",
                    gbs(s.bytes, raw.median),
                    gbs(s.bytes, pinned.median),
                    gbs(s.bytes, gh.median),
                    pinned.median / gh.median,
                    raw.median / gh.median,
                );
            }
        }
    }
    let Some(first) = r.sweep.first() else { return };
    let (ad, au) = (
        &r.sweep_anchor_download_us_raw_pinned,
        &r.sweep_anchor_upload_us_raw_pinned,
    );
    println!(
        "\nPageable staging sweep at {}, {} configurations (the best {SHOWN} and the default; raw pinned beside it: ↓ {:.2} GB/s, ↑ {:.2} GB/s)",
        size_name(first.bytes),
        r.sweep.len(),
        gbs(first.bytes, ad.median),
        gbs(first.bytes, au.median)
    );
    println!(
        "| chunk | in flight | copy threads | stores | copy step | ↓ GB/s | ↓ × pinned | ↑ GB/s | ↑ × pinned | ↓ copy GB/s, copying / awaiting DMA | ↑ copy GB/s, copying / awaiting DMA | |"
    );
    println!("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|");
    // The best rows and the default (all of them are in the JSON).
    let shown = r
        .sweep
        .iter()
        .enumerate()
        .filter(|(i, s)| *i < SHOWN || s.is_default)
        .map(|(_, s)| s);
    for s in shown {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.3}× | {:.2} | {:.3}× | {} | {} | {} |",
            size_name(s.chunk_bytes),
            s.chunks_in_flight,
            s.copy_threads,
            if s.streaming_stores {
                "streaming"
            } else {
                "cached"
            },
            size_name(s.copy_step_bytes),
            gbs(s.bytes, s.download_us.median),
            ad.median / s.download_us.median,
            gbs(s.bytes, s.upload_us.median),
            au.median / s.upload_us.median,
            s.download_stages,
            s.upload_stages,
            if s.is_default { "default" } else { "" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_sweep_leads_with_the_default_repeats_nothing_and_tries_longer_copy_steps() {
        let v = sweep_configs(false);
        assert_eq!(v[0], TransferConfig::default());
        for (i, c) in v.iter().enumerate() {
            assert!(!v[..i].contains(c), "{c:?} twice");
        }
        let default = TransferConfig::default();
        for flights in [4, 8] {
            for step in [256 << 10, 1 << 20, 8 << 20] {
                let want = TransferConfig {
                    chunks_in_flight: flights,
                    copy_step_bytes: step,
                    ..default
                };
                assert!(v.contains(&want), "{want:?} missing");
            }
        }
        // The quick sweep (CI's) stays small.
        assert!(sweep_configs(true).len() <= 4);
    }
}
