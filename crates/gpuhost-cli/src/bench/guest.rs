//! `gpuhost bench --guest`: a WebAssembly guest's launch cost, launch → synchronize round trip
//! and 64 MiB transfers against the same work from native gpuhost, side by side in one run
//! (guest_vs_native.rs), then bursts of launches through every path, graph batching included
//! (bursts.rs). `gpuhost bench --bursts` runs the second part alone.

use anyhow::{Context, Result};

use crate::guests;

/// The runtime on `device`, the bench guest loaded on it, and an executor to run it.
fn setup(
    device: usize,
) -> Result<(
    gpuhost_wasm::Runtime,
    gpuhost_wasm::Guest,
    tokio::runtime::Runtime,
)> {
    let dir = guests::dir()?;
    let host = gpuhost::host(device)
        .with_context(|| format!("opening CUDA device {device} (see `gpuhost doctor`)"))?;
    let runtime = gpuhost_wasm::Runtime::new(host)?;
    let path = dir.join("launchbench.wasm");
    let guest = runtime
        .load_file(&path)
        .with_context(|| format!("loading the bench guest {}", path.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok((runtime, guest, rt))
}

/// Runs the guest-vs-native bench, then the bursts bench, with `samples` launches a side;
/// prints markdown, returns the guest-vs-native JSON.
pub fn run(device: usize, samples: usize) -> Result<String> {
    let (runtime, guest, rt) = setup(device)?;
    let path = guests::dir()?.join("readbench.wasm");
    let reader = runtime
        .load_file(&path)
        .with_context(|| format!("loading the read bench guest {}", path.display()))?;
    let report = rt.block_on(super::guest_vs_native::guest_vs_native(
        &runtime, &guest, &reader, samples,
    ))?;
    println!("{}", report.markdown());
    let bursts = rt.block_on(super::bursts::measure(&runtime, &guest, samples))?;
    println!("{}", bursts.markdown(&report.device));
    Ok(report.json())
}

/// Runs the bursts bench alone; prints markdown, returns JSON.
pub fn run_bursts(device: usize, samples: usize) -> Result<String> {
    let (runtime, guest, rt) = setup(device)?;
    let bursts = rt.block_on(super::bursts::measure(&runtime, &guest, samples))?;
    println!("{}", bursts.markdown(&runtime.host().facts().name));
    Ok(bursts.json())
}
