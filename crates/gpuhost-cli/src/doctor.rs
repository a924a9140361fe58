//! `gpuhost doctor`: which driver was chosen (where, why, version), the devices and their facts,
//! or exactly why there are none. Exits non-zero when no usable device exists.

use anyhow::{Result, bail};

/// Options of `gpuhost doctor` (none yet; GPUHOST_DRIVER picks the driver).
#[derive(clap::Args)]
pub struct Args {}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

pub fn run(_args: Args) -> Result<()> {
    let pref = std::env::var("GPUHOST_DRIVER").unwrap_or_else(|_| "auto".into());
    println!("GPUHOST_DRIVER: {pref}");
    let info = match gpuhost::driver() {
        Ok(i) => i,
        Err(e) => bail!("{e}"),
    };
    println!("driver: {} at {}", info.kind, info.path.display());
    println!("  why: {}", info.reason);
    println!(
        "  version: {}.{} ({})",
        info.version / 1000,
        (info.version % 1000) / 10,
        info.version
    );
    let count = gpuhost::device_count()?;
    println!("devices: {count}");
    if count == 0 {
        bail!(
            "the driver loaded but reports no device (check the GPU is visible: nvidia-smi, CUDA_VISIBLE_DEVICES)"
        );
    }
    for ordinal in 0..count {
        match gpuhost::host(ordinal) {
            Ok(host) => {
                let f = host.facts();
                println!("  [{ordinal}] {}", f.name);
                println!(
                    "      compute capability {}.{} ({}), {} SMs, warp {}",
                    f.compute_capability.0,
                    f.compute_capability.1,
                    f.sm_tag(),
                    f.sm_count,
                    f.warp_size
                );
                println!(
                    "      {} threads/block, block {:?}, grid {:?}, {} KiB shared/block",
                    f.max_threads_per_block,
                    f.max_block_dim,
                    f.max_grid_dim,
                    f.max_shared_mem_per_block / 1024
                );
                match host.mem_info() {
                    Ok(m) => println!(
                        "      memory {:.1} GiB total, {:.1} GiB free",
                        gib(m.total),
                        gib(m.free)
                    ),
                    Err(e) => println!(
                        "      memory {:.1} GiB total (free unknown: {e})",
                        gib(f.total_memory)
                    ),
                }
            }
            Err(e) => println!("  [{ordinal}] unusable: {e}"),
        }
    }
    Ok(())
}
