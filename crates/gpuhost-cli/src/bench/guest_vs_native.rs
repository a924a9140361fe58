//! Guest vs native launch benchmark, side by side in one run on one device. Both sides launch
//! the same empty kernel with the same arguments and geometry, in the same three patterns: one
//! launch alone onto an idle stream, the same launch plus synchronize (the round trip), and one
//! launch within a burst of [`BURST`] back-to-back launches (timed per burst, as the core bench
//! times back-to-back launches). The guest (examples/guests/launchbench, timing
//! itself with the WASI monotonic clock) does each with an argument list (`stream.launch`) and
//! with a bound launch (`stream.enqueue`, and its own `enqueue` on the stream set for it: one
//! handle crosses instead of two); native is gpuhost's `Stream::launch`. The guest runs
//! twice: trusted (its PTX as given: the guest-vs-native rows) and sandboxed (rewritten, hidden
//! arguments, watchdog segments: the sandboxed-vs-trusted rows). A lone launch is timed between
//! two clock reads, so it is also compared with each side's clock read pair taken off: the
//! guest's clock is a WASI host call, native's a vDSO read. Native runs a pass just before each
//! trusted pass, and each such pair is compared on its own too: how far those ratios spread says
//! whether a run's ratio moved with the machine or with the guest.
//!
//! Transfers: the trusted guest times `buffer.write` and `buffer.read` of 64 MiB, and a second
//! guest (readbench, the same package) a read through `buffer.read-stream` (into its own
//! memory, no list lowered: it runs on the runtime's engine with async support); the native
//! side, in the same run, uploads and downloads 64 MiB from a pinned `HostBuffer` (which
//! `gpuhost bench` measures at raw pinned speed) and from pageable memory. The pageable copies
//! run twice: on a spinning executor, as `gpuhost bench` runs them, and awaited on this bench's
//! own (tokio's current-thread runtime, the one the guests run on, which parks its thread while
//! a chunk's DMA runs), so a guest's time beyond staging is told apart from the executor's.

use std::sync::Arc;
use std::time::Instant;

use gpuhost::{Arg, LaunchConfig, ModuleImage, ModuleSource, Registry};

use anyhow::Result;
use gpuhost_wasm::{Guest, RunOptions, Runtime};

use super::guest_pass::{GuestPass, guest_pass};
use super::host_time::HostTime;
use super::paired::{Paired, SandboxPaired};

/// The empty kernel both sides launch (the guest embeds the same file).
const NOOP_PTX: &str = include_str!("../../../../examples/guests/kernels/noop.ptx");

/// Launches per burst, on both sides (the guest's `BURST` is the same).
pub const BURST: usize = 32;

/// Medians of one launch pattern, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pattern {
    /// One launch onto an idle stream (synchronized before it).
    pub alone: u128,
    /// One launch plus synchronize.
    pub roundtrip: u128,
    /// One launch within a burst of [`BURST`].
    pub burst: u128,
}

/// The benchmark's medians.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaunchBench {
    /// Samples per measure.
    pub samples: usize,
    /// Device name.
    pub device: String,
    /// Native gpuhost: `Stream::launch`.
    pub native: Pattern,
    /// Guest: `stream.launch` with its argument list.
    pub guest: Pattern,
    /// Guest: `stream.enqueue` of the same launch, bound once.
    pub guest_bound: Pattern,
    /// Guest: the same bound launch's own `enqueue`, on the stream `set-stream` gave it.
    pub guest_held: Pattern,
    /// The sandboxed guest's `stream.launch`.
    pub sandboxed: Pattern,
    /// The sandboxed guest's `stream.enqueue`.
    pub sandboxed_bound: Pattern,
    /// Guest: a pair of WASI monotonic clock reads (each lone guest launch includes one).
    pub guest_clock_ns: u128,
    /// Native: a pair of `Instant` reads (each lone native launch includes one).
    pub native_clock_ns: u128,
    /// Each trusted pass against the native pass run just before it, by guest path.
    pub paired: Paired,
    /// Each sandboxed pass against the trusted pass beside it.
    pub sandbox_paired: SandboxPaired,
    /// Guest: the bare import round trip (`buffer.len`).
    pub guest_import_ns: u128,
    /// Guest: building the argument-list launch (gpuhost-guest's `Launch`), no host call.
    pub guest_build_ns: u128,
    /// 64 MiB transfers, each way.
    pub transfers: Transfers,
    /// A trusted guest's launches split into the host call and the rest (its own pass).
    pub host_time: HostTime,
}

/// Medians, in nanoseconds, of one transfer of `bytes` each way, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transfers {
    /// Bytes per transfer.
    pub bytes: usize,
    /// Native, from and into a pinned `HostBuffer`: (host → device, device → host).
    pub pinned: (u128, u128),
    /// Native, from and into pageable memory (gpuhost's staging), on a spinning executor.
    pub pageable: (u128, u128),
    /// The same, awaited on the executor the guests run on.
    pub pageable_awaited: (u128, u128),
    /// The guest's `buffer.write` and `buffer.read`.
    pub guest: (u128, u128),
    /// The guest's first two writes, not in `guest`'s median: the first is staged, and at the
    /// second gpuhost-wasm page-locks the guest's memory (0 from a guest that does not say).
    pub guest_first_writes: (u128, u128),
    /// The guest's read through `buffer.read-stream` (`Buffer::read_into`).
    pub guest_stream_read: u128,
    /// One core copying `bytes` into a freshly allocated `Vec`: what a lift of a `list<u8>`
    /// into a `Vec`, or the lowering of one into guest memory, costs beside the staging.
    pub memcpy: u128,
}

impl Transfers {
    fn rows(&self) -> String {
        let gbps = |ns: u128| self.bytes as f64 / ns.max(1) as f64;
        let mut s = format!(
            "| {} MiB transfer | pinned HostBuffer | pageable | guest write/read | pageable / pinned | guest / pinned |\n|---|---|---|---|---|---|\n",
            self.bytes >> 20
        );
        for (dir, p, q, g) in [
            (
                "host → device",
                self.pinned.0,
                self.pageable.0,
                self.guest.0,
            ),
            (
                "device → host",
                self.pinned.1,
                self.pageable.1,
                self.guest.1,
            ),
            (
                "device → host, read-stream",
                self.pinned.1,
                self.pageable.1,
                self.guest_stream_read,
            ),
        ] {
            s += &format!(
                "| {dir} | {:.1} GB/s | {:.1} GB/s | {:.1} GB/s | {:.3}× | {:.3}× |\n",
                gbps(p),
                gbps(q),
                gbps(g),
                gbps(q) / gbps(p),
                gbps(g) / gbps(p)
            );
        }
        s += &format!(
            "\nGuest write, first (staged) / second (locks the guest's memory) / median of the rest: {:.2} / {:.2} / {:.2} ms\n",
            self.guest_first_writes.0 as f64 / 1e6,
            self.guest_first_writes.1 as f64 / 1e6,
            self.guest.0 as f64 / 1e6
        );
        // Where a guest transfer's time goes beyond gpuhost's staging (the pageable column).
        let ms = |ns: u128| ns as f64 / 1e6;
        let beyond = |g: u128, q: u128| ms(g) - ms(q);
        s += &format!(
            "\n| {} MiB, per transfer | staging (pageable) | the same, on the guests' executor | guest beyond staging | one-core copy into a fresh Vec |\n|---|---|---|---|---|\n",
            self.bytes >> 20
        );
        for (dir, q, a, g) in [
            (
                "write (host → device)",
                self.pageable.0,
                self.pageable_awaited.0,
                self.guest.0,
            ),
            (
                "read (device → host)",
                self.pageable.1,
                self.pageable_awaited.1,
                self.guest.1,
            ),
            (
                "read-stream (device → host)",
                self.pageable.1,
                self.pageable_awaited.1,
                self.guest_stream_read,
            ),
        ] {
            s += &format!(
                "| {dir} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |\n",
                ms(q),
                ms(a),
                beyond(g, q),
                ms(self.memcpy)
            );
        }
        s
    }
}

pub(super) fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(super) fn ratio(guest: u128, native: u128) -> f64 {
    guest as f64 / native.max(1) as f64
}

impl LaunchBench {
    /// The guest's three launch paths, by name: the argument list, the bound launch by
    /// `stream.enqueue`, and the same by its own `enqueue`.
    fn paths(&self) -> [(&'static str, Pattern); 3] {
        [
            ("launch", self.guest),
            ("bound launch", self.guest_bound),
            ("bound launch by its own enqueue", self.guest_held),
        ]
    }

    /// (measure, native, guest) for each row of the table: each path alone, in bursts and as a
    /// round trip.
    fn rows(&self) -> impl Iterator<Item = (String, u128, u128)> {
        let n = self.native;
        self.paths().into_iter().flat_map(move |(name, p)| {
            [
                (format!("{name}, alone on an idle stream"), n.alone, p.alone),
                (format!("{name}, in bursts of {BURST}"), n.burst, p.burst),
                (
                    format!("{name} → synchronize round trip"),
                    n.roundtrip,
                    p.roundtrip,
                ),
            ]
        })
    }

    /// (measure, native, guest) for each lone launch, each side less its own clock read pair:
    /// a lone launch is timed between two clock reads, and the guest's clock is a host call
    /// (~120 ns a pair on an H100) where native's is a vDSO read, so the raw ratio charges the
    /// guest's launch with its clock's crossing as well.
    fn net_rows(&self) -> [(String, u128, u128); 3] {
        let native = self.native.alone.saturating_sub(self.native_clock_ns);
        self.paths().map(|(name, p)| {
            (
                name.into(),
                native,
                p.alone.saturating_sub(self.guest_clock_ns),
            )
        })
    }

    /// (measure, trusted guest, sandboxed guest) for each row of the sandbox table.
    fn sandbox_rows(&self) -> [(String, u128, u128); 4] {
        let (g, b, s, sb) = (
            self.guest,
            self.guest_bound,
            self.sandboxed,
            self.sandboxed_bound,
        );
        [
            ("launch, alone on an idle stream".into(), g.alone, s.alone),
            (
                "launch → synchronize round trip".into(),
                g.roundtrip,
                s.roundtrip,
            ),
            (format!("launch, in bursts of {BURST}"), g.burst, s.burst),
            (
                format!("bound launch, in bursts of {BURST}"),
                b.burst,
                sb.burst,
            ),
        ]
    }

    /// A markdown table (for bench/RESULTS.md).
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "guest vs native on {}, {} samples, medians:\n\n",
            self.device, self.samples
        );
        s += &table(
            ["native gpuhost", "wasm guest", "guest / native"],
            self.rows(),
        );
        s += "\n";
        s += &table(
            ["trusted guest", "sandboxed guest", "sandboxed / trusted"],
            self.sandbox_rows(),
        );
        s += "\n";
        s += &self.sandbox_paired.markdown();
        s += &format!(
            "\nguest clock read pair {} ns (native {} ns), bare import round trip {} ns, building a Launch (no call) {} ns\n\n",
            self.guest_clock_ns, self.native_clock_ns, self.guest_import_ns, self.guest_build_ns
        );
        s += "Alone on an idle stream, each side less its own clock read pair:\n\n";
        s += &table(
            ["native gpuhost", "wasm guest", "guest / native"],
            self.net_rows(),
        );
        s += "\n";
        s += &self.paired.markdown(self.paths().map(|(name, _)| name));
        s += "\n";
        s += &self.host_time.markdown();
        s += "\n";
        s + &self.transfers.rows()
    }

    /// One JSON object with the medians and ratios.
    pub fn json(&self) -> String {
        let net = self
            .net_rows()
            .map(|(_, native, guest)| ratio(guest, native));
        let pattern = |p: Pattern, base: Pattern| {
            format!(
                "{{\"alone_ns\":{},\"roundtrip_ns\":{},\"burst_ns\":{},\"alone_ratio\":{:.3},\"roundtrip_ratio\":{:.3},\"burst_ratio\":{:.3}}}",
                p.alone,
                p.roundtrip,
                p.burst,
                ratio(p.alone, base.alone),
                ratio(p.roundtrip, base.roundtrip),
                ratio(p.burst, base.burst)
            )
        };
        format!(
            "{{\"device\":{:?},\"samples\":{},\"burst\":{BURST},\"native\":{},\"guest\":{},\"guest_bound\":{},\"guest_held\":{},\"sandboxed\":{},\"sandboxed_bound\":{},\"guest_clock_ns\":{},\"native_clock_ns\":{},\"alone_net_ratio\":{{\"launch\":{:.3},\"bound\":{:.3},\"held\":{:.3}}},\"paired\":{},\"sandbox_paired\":{},\"guest_import_ns\":{},\"guest_build_ns\":{},\"transfer_bytes\":{},\"pinned_ns\":[{},{}],\"pageable_ns\":[{},{}],\"pageable_awaited_ns\":[{},{}],\"guest_transfer_ns\":[{},{}],\"guest_first_writes_ns\":[{},{}],\"guest_stream_read_ns\":{},\"memcpy_ns\":{},\"host_time\":{}}}",
            self.device,
            self.samples,
            pattern(self.native, self.native),
            pattern(self.guest, self.native),
            pattern(self.guest_bound, self.native),
            pattern(self.guest_held, self.native),
            pattern(self.sandboxed, self.guest),
            pattern(self.sandboxed_bound, self.guest_bound),
            self.guest_clock_ns,
            self.native_clock_ns,
            net[0],
            net[1],
            net[2],
            self.paired.json(),
            self.sandbox_paired.json(),
            self.guest_import_ns,
            self.guest_build_ns,
            self.transfers.bytes,
            self.transfers.pinned.0,
            self.transfers.pinned.1,
            self.transfers.pageable.0,
            self.transfers.pageable.1,
            self.transfers.pageable_awaited.0,
            self.transfers.pageable_awaited.1,
            self.transfers.guest.0,
            self.transfers.guest.1,
            self.transfers.guest_first_writes.0,
            self.transfers.guest_first_writes.1,
            self.transfers.guest_stream_read,
            self.transfers.memcpy,
            self.host_time.json()
        )
    }
}

/// A markdown table of (measure, base, other) rows with their ratio, headed `head`.
fn table(head: [&str; 3], rows: impl IntoIterator<Item = (String, u128, u128)>) -> String {
    let [a, b, r] = head;
    let mut s = format!("| measure | {a} | {b} | {r} |\n|---|---|---|---|\n");
    for (what, base, other) in rows {
        s += &format!(
            "| {what} | {:.2} µs | {:.2} µs | {:.2}× |\n",
            base as f64 / 1e3,
            other as f64 / 1e3,
            ratio(other, base)
        );
    }
    s
}

/// Native samples, in nanoseconds.
#[derive(Default)]
struct NativeSamples {
    alone: Vec<u128>,
    roundtrip: Vec<u128>,
    burst: Vec<u128>,
    /// `Instant` read pairs, timed as the guest times its WASI clock's.
    clock: Vec<u128>,
}

impl NativeSamples {
    /// The medians of each pattern, and of the clock read pairs.
    fn medians(&self) -> (Pattern, u128) {
        let pattern = Pattern {
            alone: median(self.alone.clone()),
            roundtrip: median(self.roundtrip.clone()),
            burst: median(self.burst.clone()),
        };
        (pattern, median(self.clock.clone()))
    }

    /// Pools `other`'s samples into these.
    fn append(&mut self, mut other: NativeSamples) {
        self.alone.append(&mut other.alone);
        self.roundtrip.append(&mut other.roundtrip);
        self.burst.append(&mut other.burst);
        self.clock.append(&mut other.clock);
    }
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
        into.alone.push(t0.elapsed().as_nanos());
        done.await?;
        into.roundtrip.push(t0.elapsed().as_nanos());
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
    into.clock
        .extend((0..count).map(|_| Instant::now().elapsed().as_nanos()));
    Ok(())
}

/// Timed transfers each way per path, after one warm-up each (as the guest does).
const TRANSFERS: usize = 5;

/// Runs both sides, `samples` launches each. `bench_guest` is launchbench.wasm and `read_guest`
/// readbench.wasm, loaded on `runtime`.
pub async fn guest_vs_native(
    runtime: &Runtime,
    bench_guest: &Guest,
    read_guest: &Guest,
    samples: usize,
) -> Result<LaunchBench> {
    let samples = samples.max(1);
    let host = runtime.host();
    let source = ModuleSource::new("noop", ModuleImage::Ptx(NOOP_PTX.into()));
    let registry = Registry::from_sources(host, "bench", vec![source])?;
    let kernel = registry.kernel("noop")?;
    let buf = host.alloc(1024)?;
    let stream = host.stream()?;
    let mut warm_up = NativeSamples::default();
    native_pass(&stream, &kernel, &buf, samples / 10 + 1, &mut warm_up).await?;
    // Trusted and sandboxed passes in the order T S S T T S S T, each side the median of its
    // four: a drift of the machine across the passes (clocks, caches) then weighs on both sides
    // alike, where T then S put all of it on one, and one pass that lands badly (single passes
    // moved the two sides' ratio 0.92-1.45 within one run) does not decide a side. A native
    // pass runs just before each trusted one, and native's figures pool all four: each trusted
    // pass is also compared with its own neighbour (`paired`), which tells a drift of the
    // machine during the run (the pairs agree) from one that is the guest's (they do not).
    let (mut trusted, mut sandboxed) = (Vec::new(), Vec::new());
    let mut native = NativeSamples::default();
    let mut beside = Vec::new();
    for sandbox in [false, true, true, false, false, true, true, false] {
        if !sandbox {
            let mut pass = NativeSamples::default();
            native_pass(&stream, &kernel, &buf, samples.div_ceil(2), &mut pass).await?;
            beside.push(pass.medians());
            native.append(pass);
        }
        let pass = guest_pass(runtime, bench_guest, samples, sandbox).await?;
        if sandbox {
            &mut sandboxed
        } else {
            &mut trusted
        }
        .push(pass);
    }
    let paired = Paired::of(&trusted, &beside);
    let sandbox_paired = SandboxPaired::of(&trusted, &sandboxed);
    let (trusted, sandboxed) = (GuestPass::middle(&trusted), GuestPass::middle(&sandboxed));
    let host_time = super::host_time::measure(runtime, bench_guest, samples).await?;
    // The native side as `gpuhost bench` measures it (its HostBuffer and pageable rows).
    let copies = super::transfer::measure(host, &stream, trusted.transfer_bytes, TRANSFERS)?;
    let ns = |s: &super::stats::Summary| (s.median * 1e3) as u128;
    let pinned = (
        ns(&copies.upload_us_host_buffer),
        ns(&copies.download_us_host_buffer),
    );
    let pageable = (
        ns(&copies.upload_us_gpuhost),
        ns(&copies.download_us_gpuhost),
    );
    let pageable_awaited = awaited_pageable_ns(host, &stream, trusted.transfer_bytes).await?;
    let memcpy = fresh_copy_ns(trusted.transfer_bytes);
    let (native, native_clock_ns) = native.medians();
    Ok(LaunchBench {
        samples,
        device: host.facts().name.clone(),
        native,
        guest: trusted.launch,
        guest_bound: trusted.bound,
        guest_held: trusted.held,
        sandboxed: sandboxed.launch,
        sandboxed_bound: sandboxed.bound,
        guest_clock_ns: trusted.clock_ns,
        native_clock_ns,
        paired,
        sandbox_paired,
        guest_import_ns: trusted.import_ns,
        guest_build_ns: trusted.build_ns,
        transfers: Transfers {
            bytes: trusted.transfer_bytes,
            pinned,
            pageable,
            pageable_awaited,
            guest: trusted.transfer,
            guest_first_writes: trusted.first_writes,
            guest_stream_read: stream_read_ns(runtime, read_guest).await?,
            memcpy,
        },
        host_time,
    })
}

/// The median of the read bench guest's 64 MiB reads through `buffer.read-stream`.
async fn stream_read_ns(runtime: &Runtime, read_guest: &Guest) -> Result<u128> {
    let out = runtime.run(read_guest, RunOptions::default()).await?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("stream_read_ns=")?.parse().ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the read bench guest printed {text:?} (stderr {:?}) instead of its timing",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Medians of a native pageable upload and download of `bytes` (host → device, device → host),
/// awaited on the calling executor: the one the guests run on, unlike `transfer::measure`'s
/// spinning `block_on`.
async fn awaited_pageable_ns(
    host: &Arc<gpuhost::Host>,
    stream: &gpuhost::Stream,
    bytes: usize,
) -> Result<(u128, u128)> {
    let buf = host.alloc(bytes)?;
    let mut data = vec![7u8; bytes];
    let (mut up, mut down) = (Vec::with_capacity(TRANSFERS), Vec::with_capacity(TRANSFERS));
    // Round 0 warms up (the staging pool, page faults of `data`) and is not kept.
    for round in 0..=TRANSFERS {
        let t0 = Instant::now();
        stream.upload(&buf, 0, &data).await?;
        let u = t0.elapsed().as_nanos();
        let t0 = Instant::now();
        stream.download(&buf, 0, &mut data).await?;
        let d = t0.elapsed().as_nanos();
        if round > 0 {
            up.push(u);
            down.push(d);
        }
    }
    Ok((median(up), median(down)))
}

/// Median time for one core to copy `bytes` into a freshly allocated `Vec` (after a warm-up).
fn fresh_copy_ns(bytes: usize) -> u128 {
    let src = vec![1u8; bytes];
    let mut samples = Vec::with_capacity(TRANSFERS);
    for i in 0..=TRANSFERS {
        let t0 = Instant::now();
        let copy = std::hint::black_box(src.as_slice()).to_vec();
        let ns = t0.elapsed().as_nanos();
        drop(std::hint::black_box(copy));
        if i > 0 {
            samples.push(ns);
        }
    }
    median(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trusted pass whose three paths launch alone in `alone` ns and in bursts in `burst`.
    fn pass(alone: u128, burst: u128, clock_ns: u128) -> GuestPass {
        let p = Pattern {
            alone,
            roundtrip: 0,
            burst,
        };
        GuestPass {
            launch: p,
            bound: p,
            held: p,
            clock_ns,
            import_ns: 0,
            build_ns: 0,
            transfer: (0, 0),
            first_writes: (0, 0),
            transfer_bytes: 0,
        }
    }

    /// Asserts that `b`'s markdown has `row` and its JSON has `json`.
    fn shows(b: &LaunchBench, row: &str, json: &str) {
        let (md, js) = (b.markdown(), b.json());
        assert!(md.contains(row), "no {row:?} in {md}");
        assert!(js.contains(json), "no {json:?} in {js}");
    }

    #[test]
    fn each_trusted_pass_is_compared_with_the_native_pass_just_before_it() {
        // The machine slows by half between the pairs; the guest costs 1.1x native in each.
        let native = |alone, burst| {
            (
                Pattern {
                    alone,
                    roundtrip: 0,
                    burst,
                },
                20,
            )
        };
        let beside = [native(3_020, 1_000), native(4_520, 1_500)];
        let trusted = [pass(3_420, 1_100, 120), pass(5_070, 1_650, 120)];
        let paired = Paired::of(&trusted, &beside);
        assert_eq!(paired.pairs, 2);
        for s in paired.alone_net.iter().chain(&paired.burst) {
            assert!((s.median - 1.1).abs() < 1e-9, "{paired:?}");
            assert!((s.min - 1.1).abs() < 1e-9 && (s.max - 1.1).abs() < 1e-9);
        }
        shows(
            &LaunchBench {
                paired,
                ..LaunchBench::default()
            },
            "| bound launch | 1.10× (1.10–1.10) | 1.10× (1.10–1.10) |",
            "\"paired\":{\"pairs\":2,\"alone_net\":{\"launch\":{\"median\":1.100,\"min\":1.100,\"max\":1.100}",
        );
    }

    #[test]
    fn each_sandboxed_pass_is_compared_with_the_trusted_pass_beside_it() {
        // Two pairs on a machine that slows by half between them; the sandbox costs 1.05x in
        // a lone launch, 1.2x in bursts, in each pair.
        let sandboxed = [pass(3_270, 1_200, 120), pass(4_845, 1_800, 120)];
        let trusted = [pass(3_120, 1_000, 120), pass(4_620, 1_500, 120)];
        let paired = SandboxPaired::of(&trusted, &sandboxed);
        assert_eq!(paired.pairs, 2);
        assert!((paired.alone_net.median - 1.05).abs() < 1e-9, "{paired:?}");
        assert!(
            (paired.burst.max - 1.2).abs() < 1e-9 && (paired.bound_burst.min - 1.2).abs() < 1e-9
        );
        shows(
            &LaunchBench {
                sandbox_paired: paired,
                ..LaunchBench::default()
            },
            "| 1.05× (1.05–1.05) | 1.20× (1.20–1.20) | 1.20× (1.20–1.20) |",
            "\"sandbox_paired\":{\"pairs\":2,\"alone_net\":{\"median\":1.050",
        );
    }

    #[test]
    fn lone_launches_are_compared_less_each_sides_own_clock_read_pair() {
        let at = |alone| Pattern {
            alone,
            ..Pattern::default()
        };
        let b = LaunchBench {
            native: at(3_300),
            guest: at(3_960),
            guest_bound: at(3_670),
            guest_held: at(3_550),
            guest_clock_ns: 120,
            native_clock_ns: 30,
            ..LaunchBench::default()
        };
        let net: Vec<_> = b.net_rows().iter().map(|r| (r.1, r.2)).collect();
        assert_eq!(net, [(3_270, 3_840), (3_270, 3_550), (3_270, 3_430)]);
        let md = b.markdown();
        assert!(
            md.contains("| bound launch | 3.27 µs | 3.55 µs | 1.09× |"),
            "{md}"
        );
        assert!(
            b.json()
                .contains("\"alone_net_ratio\":{\"launch\":1.174,\"bound\":1.086,\"held\":1.049}"),
            "{}",
            b.json()
        );
    }
}
