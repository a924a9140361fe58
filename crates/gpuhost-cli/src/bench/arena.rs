//! Allocation benchmark: a zeroed buffer allocated and freed through the raw driver (cuMemAlloc,
//! cuMemsetD8, a legacy-stream synchronize, cuMemFree: what zeroed memory costs without gpuhost)
//! and from a gpuhost guest arena (`Arena::alloc`, which zeroes the same way, then dropping the
//! buffer, which gives its range back), alternating, medians.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use gpuhost::{Host, sys};

use super::raw::ok;
use super::stats::Summary;

/// One size's medians, in microseconds.
#[derive(serde::Serialize)]
pub struct AllocResult {
    pub bytes: usize,
    pub alloc_free_us_raw: Summary,
    pub alloc_free_us_arena: Summary,
}

/// Measures `reps` zeroed allocations of `bytes` a side (round 0 warms up and is not kept).
pub fn run(host: &Arc<Host>, bytes: usize, reps: usize) -> Result<AllocResult> {
    let arena = host.arena(64 << 20)?;
    let (mut raw, mut gh) = (Vec::new(), Vec::new());
    for round in 0..=reps {
        host.enter()?;
        let t = Instant::now();
        let mut p = 0;
        // SAFETY: the context is bound; `p` is a valid out pointer; the allocation is zeroed,
        // awaited and freed once, before the next call.
        unsafe {
            ok("cuMemAlloc_v2", sys::cuMemAlloc_v2(&mut p, bytes))?;
            ok("cuMemsetD8_v2", sys::cuMemsetD8_v2(p, 0, bytes))?;
            ok(
                "cuStreamSynchronize",
                sys::cuStreamSynchronize(std::ptr::null_mut()),
            )?;
            ok("cuMemFree_v2", sys::cuMemFree_v2(p))?;
        }
        let raw_t = t.elapsed();
        let t = Instant::now();
        drop(arena.alloc(bytes as u64)?);
        let gh_t = t.elapsed();
        if round > 0 {
            raw.push(raw_t.as_secs_f64() * 1e6);
            gh.push(gh_t.as_secs_f64() * 1e6);
        }
    }
    Ok(AllocResult {
        bytes,
        alloc_free_us_raw: Summary::of(raw),
        alloc_free_us_arena: Summary::of(gh),
    })
}
