//! Transfer benchmark: device→host and host→device copies of a few sizes through the raw driver
//! (synchronous cuMemcpyDtoH/HtoD on pageable memory, what a caller without gpuhost writes) and
//! through gpuhost's `Stream::download` / `upload` (page-locked staging, fence-awaited, never
//! blocking the thread), alternating, medians.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use gpuhost::{Host, sys};

use super::raw::ok;
use super::stats::{Summary, block_on_spin};

/// One size's medians, in microseconds.
#[derive(serde::Serialize)]
pub struct TransferResult {
    pub bytes: usize,
    pub download_us_raw: Summary,
    pub download_us_gpuhost: Summary,
    pub upload_us_raw: Summary,
    pub upload_us_gpuhost: Summary,
}

/// Measures each of `sizes` `reps` times a side.
pub fn run(host: &Arc<Host>, sizes: &[usize], reps: usize) -> Result<Vec<TransferResult>> {
    let stream = host.stream()?;
    let mut out = Vec::new();
    for &bytes in sizes {
        let buf = host.alloc(bytes)?;
        let mut data = vec![7u8; bytes];
        let (mut dr, mut dg, mut ur, mut ug) = (vec![], vec![], vec![], vec![]);
        // Round 0 warms up (the staging pool, page faults of `data`) and is not kept.
        for round in 0..=reps {
            host.enter()?;
            let t = Instant::now();
            // SAFETY: the context is bound; `data` holds `bytes` writable bytes; the buffer
            // holds `bytes` bytes and lives across the call.
            ok("cuMemcpyDtoH_v2", unsafe {
                sys::cuMemcpyDtoH_v2(data.as_mut_ptr().cast(), buf.device_ptr(), bytes)
            })?;
            let raw_down = t.elapsed();
            let t = Instant::now();
            block_on_spin(stream.download(&buf, 0, &mut data))?;
            let gh_down = t.elapsed();
            host.enter()?;
            let t = Instant::now();
            // SAFETY: as above, reading `data`.
            ok("cuMemcpyHtoD_v2", unsafe {
                sys::cuMemcpyHtoD_v2(buf.device_ptr(), data.as_ptr().cast(), bytes)
            })?;
            let raw_up = t.elapsed();
            let t = Instant::now();
            block_on_spin(stream.upload(&buf, 0, &data))?;
            let gh_up = t.elapsed();
            if round > 0 {
                let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
                dr.push(us(raw_down));
                dg.push(us(gh_down));
                ur.push(us(raw_up));
                ug.push(us(gh_up));
            }
        }
        out.push(TransferResult {
            bytes,
            download_us_raw: Summary::of(dr),
            download_us_gpuhost: Summary::of(dg),
            upload_us_raw: Summary::of(ur),
            upload_us_gpuhost: Summary::of(ug),
        });
    }
    Ok(out)
}

/// Markdown rows: one per size and direction.
pub fn print(results: &[TransferResult]) {
    println!("\n| transfer (median) | raw driver, µs | gpuhost, µs | ratio | gpuhost GB/s |");
    println!("|---|---:|---:|---:|---:|");
    for r in results {
        let size = if r.bytes >= 1 << 20 {
            format!("{} MiB", r.bytes >> 20)
        } else {
            format!("{} KiB", r.bytes >> 10)
        };
        for (dir, raw, gh) in [
            ("device → host", &r.download_us_raw, &r.download_us_gpuhost),
            ("host → device", &r.upload_us_raw, &r.upload_us_gpuhost),
        ] {
            println!(
                "| {dir}, {size} | {:.1} | {:.1} | {:.3}× | {:.2} |",
                raw.median,
                gh.median,
                gh.median / raw.median,
                r.bytes as f64 / gh.median / 1e3
            );
        }
    }
}
