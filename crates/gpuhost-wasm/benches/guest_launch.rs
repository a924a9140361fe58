//! Guest vs native, side by side in one run, on one device: the cost of enqueuing one launch
//! (an empty kernel) and the launch → synchronize round trip. Medians over N samples, and the
//! guest/native ratio (goal for launch cost: ≤ 1.2×).
//!
//! `cargo bench -p gpuhost-wasm --bench guest_launch [-- N]` (default N = 2000). Prints a
//! markdown table for bench/RESULTS.md. The guest is examples/guests/misbehave in `bench` mode,
//! timing itself with the WASI monotonic clock.

use std::path::PathBuf;
use std::time::Instant;

use gpuhost::{Arg, LaunchConfig, ModuleImage, ModuleSource, Registry};
use gpuhost_wasm::{RunOptions, Runtime};

const NOOP_PTX: &str = include_str!("../../../examples/guests/kernels/noop.ptx");

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let host = match gpuhost::host(0) {
        Ok(h) => h,
        Err(e) => {
            println!("skipped: no driver ({e})");
            return Ok(());
        }
    };
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    // Native: the same kernel, arguments and geometry through gpuhost directly.
    let registry = Registry::from_sources(
        &host,
        "bench",
        vec![ModuleSource::new("noop", ModuleImage::Ptx(NOOP_PTX.into()))],
    )?;
    let kernel = registry.kernel("noop")?;
    let buf = host.alloc(1024)?;
    let stream = host.stream()?;
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let (mut launch, mut round) = (Vec::with_capacity(n), Vec::with_capacity(n));
    tokio.block_on(async {
        for _ in 0..n {
            let t0 = Instant::now();
            let done = stream.launch(&kernel, cfg, &[Arg::Buffer(&buf, 0), Arg::U32(256)])?;
            launch.push(t0.elapsed().as_nanos());
            done.await?;
            round.push(t0.elapsed().as_nanos());
        }
        Ok::<_, gpuhost::Error>(())
    })?;
    let (native_launch, native_round) = (median(launch), median(round));

    // Guest: one run doing n launches, timed inside the guest.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../..");
    let dir = gpuhost_wasm::example_guests::build(&root)?;
    let runtime = Runtime::new(host.clone())?;
    let guest = runtime.load_file(&dir.join("misbehave.wasm"))?;
    let opts = RunOptions {
        args: vec!["misbehave".into(), "bench".into(), n.to_string()],
        ..RunOptions::default()
    };
    let out = tokio.block_on(runtime.run(&guest, opts))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> Option<u128> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    let (Some(guest_launch), Some(guest_round)) = (field("launch_ns"), field("roundtrip_ns"))
    else {
        return Err(format!(
            "guest bench printed {text:?}, stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    };

    let driver = gpuhost::driver()
        .map(|d| d.kind.to_string())
        .unwrap_or_default();
    println!(
        "guest vs native on {} ({driver}), {n} samples, medians:\n",
        host.facts().name
    );
    println!("| measure | native gpuhost | wasm guest | guest / native |");
    println!("|---|---|---|---|");
    let row = |what: &str, native: u128, guest: u128| {
        println!(
            "| {what} | {:.2} µs | {:.2} µs | {:.2}× |",
            native as f64 / 1e3,
            guest as f64 / 1e3,
            guest as f64 / native.max(1) as f64
        );
    };
    row("launch (enqueue) cost", native_launch, guest_launch);
    row("launch → synchronize round trip", native_round, guest_round);
    Ok(())
}
