//! The README's example, compiled by `cargo test` and runnable with
//! `cargo run -p gpuhost --example swap`: host → registry → launch → await → swap, on the GPU if
//! there is one, else on softcuda.

use std::path::PathBuf;
use std::time::Duration;

use gpuhost::{Arg, LaunchConfig, ModelSlot, Registry};

#[tokio::main]
async fn main() -> Result<(), gpuhost::Error> {
    let bundles = PathBuf::from(env_or_here()).join("bundles");
    let host = gpuhost::host(0)?; // one per device for the process
    let slot = ModelSlot::new(Registry::load(&host, bundles.join("stamp-a"))?);

    let n = 1024u32;
    let out = host.alloc(4 * n as usize)?;
    let stream = host.stream()?;
    for round in 0..2 {
        let lease = slot.acquire("request-17")?; // counted as in flight
        let stamp = lease.kernel("stamp")?; // keeps the registry alive
        stream
            .launch(
                &stamp,
                LaunchConfig::for_elements(n, 256),
                &[Arg::Buffer(&out, 0), Arg::U32(n)],
            )?
            .await?; // woken by the completion thread, not a blocked executor thread
        let mut first = [0u8; 4];
        out.read(0, &mut first)?;
        println!(
            "round {round}: model {} wrote {:#010x}",
            lease.name(),
            u32::from_le_bytes(first)
        );
        drop((stamp, lease));

        // Loads the new model while the old one serves, publishes it, drains, releases the old.
        let report = slot.swap(
            Registry::load(&host, bundles.join("stamp-b"))?,
            Duration::from_secs(5),
        );
        println!(
            "swapped in {:?} (old released: {})",
            report.duration,
            report.release.is_some()
        );
    }
    Ok(())
}

/// The gpuhost crate folder: CARGO_MANIFEST_DIR under cargo, else the current folder.
fn env_or_here() -> String {
    std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| "crates/gpuhost".into())
}
