//! `gpuhost doctor`: which driver was chosen (where, why, version), the devices and their facts,
//! or exactly why there are none. Exits non-zero when no usable device exists.

use std::fmt::Write;

use anyhow::{Result, bail};

/// Options of `gpuhost doctor` (none yet; GPUHOST_DRIVER picks the driver).
#[derive(clap::Args)]
pub struct Args {}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

pub fn run(_args: Args) -> Result<()> {
    let (text, usable) = report();
    print!("{text}");
    if !usable {
        bail!("no usable CUDA device (see above)");
    }
    Ok(())
}

/// The doctor's report, and whether at least one device is usable.
fn report() -> (String, bool) {
    let mut out = String::new();
    let usable = write_report(&mut out).unwrap_or(false);
    (out, usable)
}

fn write_report(out: &mut String) -> Result<bool> {
    let pref = std::env::var("GPUHOST_DRIVER").unwrap_or_else(|_| "auto".into());
    writeln!(out, "GPUHOST_DRIVER: {pref}")?;
    let info = match gpuhost::driver() {
        Ok(i) => i,
        Err(e) => {
            writeln!(out, "driver: none\n  why: {e}")?;
            return Ok(false);
        }
    };
    writeln!(out, "driver: {} at {}", info.kind, info.path.display())?;
    writeln!(out, "  why: {}", info.reason)?;
    writeln!(
        out,
        "  version: {}.{} ({})",
        info.version / 1000,
        (info.version % 1000) / 10,
        info.version
    )?;
    let count = match gpuhost::device_count() {
        Ok(n) => n,
        Err(e) => {
            writeln!(out, "devices: unknown ({e})")?;
            return Ok(false);
        }
    };
    writeln!(out, "devices: {count}")?;
    if count == 0 {
        writeln!(
            out,
            "  the driver loaded but reports no device (check that the GPU is visible: nvidia-smi, CUDA_VISIBLE_DEVICES)"
        )?;
        return Ok(false);
    }
    let mut usable = false;
    for ordinal in 0..count {
        let host = match gpuhost::host(ordinal) {
            Ok(h) => h,
            Err(e) => {
                writeln!(out, "  [{ordinal}] unusable: {e}")?;
                continue;
            }
        };
        usable = true;
        let f = host.facts();
        writeln!(out, "  [{ordinal}] {}", f.name)?;
        writeln!(
            out,
            "      compute capability {}.{} ({}), {} SMs, warp {}",
            f.compute_capability.0,
            f.compute_capability.1,
            f.sm_tag(),
            f.sm_count,
            f.warp_size
        )?;
        writeln!(
            out,
            "      {} threads/block, block {:?}, grid {:?}, {} KiB shared/block",
            f.max_threads_per_block,
            f.max_block_dim,
            f.max_grid_dim,
            f.max_shared_mem_per_block / 1024
        )?;
        match host.mem_info() {
            Ok(m) => writeln!(
                out,
                "      memory {:.1} GiB total, {:.1} GiB free",
                gib(m.total),
                gib(m.free)
            )?,
            Err(e) => writeln!(
                out,
                "      memory {:.1} GiB total (free unknown: {e})",
                gib(f.total_memory)
            )?,
        }
    }
    Ok(usable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_the_driver_and_each_device_or_why_none() {
        let (text, usable) = report();
        println!("{text}");
        match gpuhost::host(0) {
            Ok(h) => {
                assert!(usable);
                let kind = gpuhost::driver().unwrap().kind.to_string();
                assert!(text.contains(&format!("driver: {kind} at ")), "{text}");
                assert!(text.contains(&format!("[0] {}", h.facts().name)), "{text}");
                assert!(text.contains("compute capability"), "{text}");
            }
            Err(e) => {
                assert!(!usable);
                assert!(
                    text.contains(&e.to_string()) || text.contains("unusable"),
                    "{text}"
                );
            }
        }
    }
}
