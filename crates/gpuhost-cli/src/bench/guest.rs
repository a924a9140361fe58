//! `gpuhost bench --guest`: a WebAssembly guest's launch cost, launch → synchronize round trip
//! and 64 MiB transfers against the same work from native gpuhost, side by side in one run
//! (guest_vs_native.rs).

use anyhow::{Context, Result};

use crate::guests;

/// Runs the guest-vs-native bench with `samples` launches a side; prints markdown, returns JSON.
pub fn run(device: usize, samples: usize) -> Result<String> {
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
    let report = rt.block_on(super::guest_vs_native::guest_vs_native(
        &runtime, &guest, samples,
    ))?;
    println!("{}", report.markdown());
    Ok(report.json())
}
