//! One run of the bench guest (examples/guests/launchbench) and what it measured: the guest is
//! run with its arguments under the given limits, and its printed `name=value` timings read back
//! into a [`GuestPass`]. `gpuhost bench --guest` (guest_vs_native.rs), `--bursts` and the
//! host-time rows all run the guest this way.

use std::sync::Arc;

use anyhow::Result;
use gpuhost_wasm::{CallObserver, Guest, Limits, RunOptions, RunOutcome, Runtime};

use super::guest_vs_native::Pattern;

/// What one run of the bench guest measured.
pub(super) struct GuestPass {
    pub(super) launch: Pattern,
    pub(super) bound: Pattern,
    pub(super) held: Pattern,
    pub(super) clock_ns: u128,
    pub(super) import_ns: u128,
    pub(super) build_ns: u128,
    pub(super) transfer: (u128, u128),
    pub(super) first_writes: (u128, u128),
    pub(super) transfer_bytes: usize,
}

/// The median of `v` (the mean of the middle two for an even count).
fn middle_of(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

impl GuestPass {
    /// Each timing the median of the passes'.
    pub(super) fn middle(passes: &[GuestPass]) -> GuestPass {
        let m = |f: fn(&GuestPass) -> u128| middle_of(passes.iter().map(f).collect());
        let pattern = |alone, roundtrip, burst| Pattern {
            alone: m(alone),
            roundtrip: m(roundtrip),
            burst: m(burst),
        };
        GuestPass {
            launch: pattern(
                |p| p.launch.alone,
                |p| p.launch.roundtrip,
                |p| p.launch.burst,
            ),
            bound: pattern(|p| p.bound.alone, |p| p.bound.roundtrip, |p| p.bound.burst),
            held: pattern(|p| p.held.alone, |p| p.held.roundtrip, |p| p.held.burst),
            clock_ns: m(|p| p.clock_ns),
            import_ns: m(|p| p.import_ns),
            build_ns: m(|p| p.build_ns),
            transfer: (m(|p| p.transfer.0), m(|p| p.transfer.1)),
            first_writes: (m(|p| p.first_writes.0), m(|p| p.first_writes.1)),
            transfer_bytes: passes.first().map_or(0, |p| p.transfer_bytes),
        }
    }
}

/// One run of the bench guest (`launchbench`) and what it printed: `name=value` fields.
pub(super) struct BenchGuestRun {
    pub(super) out: RunOutcome,
    text: String,
}

impl BenchGuestRun {
    /// The printed `name=value` field `name`, if any.
    pub(super) fn field(&self, name: &str) -> Option<u128> {
        self.text
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    }

    /// The error for output that lacks `what`.
    pub(super) fn unexpected(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "the bench guest printed {:?} (stderr {:?}) instead of {what}",
            self.text,
            String::from_utf8_lossy(&self.out.stderr)
        )
    }
}

/// Runs the bench guest with `args` after its name, under `limits`.
pub(super) async fn run_bench_guest(
    runtime: &Runtime,
    bench_guest: &Guest,
    args: &[&str],
    limits: Limits,
    calls: Option<Arc<dyn CallObserver>>,
) -> Result<BenchGuestRun> {
    let args = std::iter::once("launchbench")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let out = runtime
        .run(
            bench_guest,
            RunOptions {
                args,
                limits,
                calls,
                ..RunOptions::default()
            },
        )
        .await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(BenchGuestRun { out, text })
}

/// Runs the bench guest once, trusted or sandboxed, and reads its timings.
pub(super) async fn guest_pass(
    runtime: &Runtime,
    bench_guest: &Guest,
    samples: usize,
    sandbox: bool,
) -> Result<GuestPass> {
    let limits = Limits {
        sandbox,
        ..Limits::default()
    };
    let run = run_bench_guest(runtime, bench_guest, &[&samples.to_string()], limits, None).await?;
    let field = |name: &str| run.field(name);
    let names = [
        "launch_ns",
        "roundtrip_ns",
        "burst_ns",
        "bound_launch_ns",
        "bound_roundtrip_ns",
        "bound_burst_ns",
        "held_launch_ns",
        "held_roundtrip_ns",
        "held_burst_ns",
        "clock_ns",
        "import_ns",
        "build_ns",
        "write_ns",
        "read_ns",
        "bytes",
    ];
    let [
        Some(la),
        Some(lr),
        Some(lb),
        Some(ba),
        Some(br),
        Some(bb),
        Some(ha),
        Some(hr),
        Some(hb),
        Some(clock_ns),
        Some(import_ns),
        Some(build_ns),
        Some(write_ns),
        Some(read_ns),
        Some(bytes),
    ] = names.map(field)
    else {
        return Err(run.unexpected("its timings"));
    };
    let pattern = |alone, roundtrip, burst| Pattern {
        alone,
        roundtrip,
        burst,
    };
    Ok(GuestPass {
        launch: pattern(la, lr, lb),
        bound: pattern(ba, br, bb),
        held: pattern(ha, hr, hb),
        clock_ns,
        import_ns,
        build_ns,
        transfer: (write_ns, read_ns),
        first_writes: (
            field("write_first_ns").unwrap_or(0),
            field("write_second_ns").unwrap_or(0),
        ),
        transfer_bytes: bytes as usize,
    })
}
