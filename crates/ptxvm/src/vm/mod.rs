//! Launching a grid: validation, spreading blocks over worker threads, running the warps of a
//! block cooperatively (round-robin slices, barriers), and turning the first fault into `Fault`.

mod access;
mod alu;
mod cvt;
mod devcall;
mod exec;
mod float;
mod mem;
mod schedule;
mod warp;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

pub(crate) use float::from_half;

use crate::Module;
use crate::api::{Fault, FaultKind, Launch, LaunchStats, Memory};
use crate::devio::DeviceOutput;
use crate::ir::Kernel;
use exec::{BlockMem, Stop};
use mem::Mem;
use warp::{Warp, WarpPlace, dyn_base};

/// Instructions a warp runs before the block scheduler moves on (lets spin-waits progress).
const SLICE: u64 = 1 << 16;
/// Most threads per block, as on every CUDA GPU.
const MAX_BLOCK_THREADS: u64 = 1024;
/// Most bytes of register file a block may need (our registers are 64-bit × 32 lanes).
const MAX_BLOCK_STATE: u64 = 512 << 20;
/// Most local memory per thread, as on CUDA GPUs.
const MAX_LOCAL_PER_THREAD: u64 = 512 << 10;
/// Most shared memory per block (H100/H200 opt-in maximum).
pub const MAX_SHARED_BYTES: u64 = 227 * 1024;

/// Runs a kernel over a grid. Blocks run on up to `launch.workers` threads. Device `printf`
/// output goes to a 1 MiB FIFO that is then dropped; [`launch_with_output`] keeps it.
pub fn launch(
    module: &Module,
    launch: &Launch<'_>,
    mem: &dyn Memory,
) -> Result<LaunchStats, Fault> {
    launch_with_output(module, launch, mem, &DeviceOutput::new(1 << 20))
}

/// [`launch`], with device `printf` records written to `out`.
pub fn launch_with_output(
    module: &Module,
    launch: &Launch<'_>,
    mem: &dyn Memory,
    out: &DeviceOutput,
) -> Result<LaunchStats, Fault> {
    let name = module
        .kernels()
        .get(launch.kernel)
        .map_or_else(|| format!("#{}", launch.kernel), |k| k.name.clone());
    let invalid = |why: String| Fault {
        kind: FaultKind::InvalidLaunch(why),
        kernel: name.clone(),
        block: [0; 3],
        thread: [0; 3],
        line: 0,
    };
    let Some(k) = module.kernel(launch.kernel) else {
        return Err(invalid(format!(
            "kernel index {} out of range (module has {})",
            launch.kernel,
            module.kernels().len()
        )));
    };
    let [bx, by, bz] = launch.block;
    let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
    if threads == 0 || threads > MAX_BLOCK_THREADS {
        return Err(invalid(format!(
            "block {:?} has {threads} threads; use 1..=1024",
            launch.block
        )));
    }
    if let Some(max) = k.info.max_threads_per_block
        && threads > u64::from(max)
    {
        return Err(invalid(format!(
            "block has {threads} threads; the kernel allows {max}"
        )));
    }
    let [gx, gy, gz] = launch.grid;
    let blocks = u64::from(gx) * u64::from(gy) * u64::from(gz);
    if blocks == 0 {
        return Err(invalid(format!("grid {:?} is empty", launch.grid)));
    }
    let shared =
        u64::from(dyn_base(k.info.static_shared_bytes)) + u64::from(launch.dynamic_shared_bytes);
    if shared > MAX_SHARED_BYTES {
        return Err(invalid(format!(
            "{shared} bytes of shared memory exceed {MAX_SHARED_BYTES}"
        )));
    }
    let need = k
        .info
        .params
        .iter()
        .map(|p| p.offset + p.size)
        .max()
        .unwrap_or(0);
    if (launch.params.len() as u64) < u64::from(need) {
        return Err(invalid(format!(
            "parameter buffer has {} bytes; the kernel needs {need}",
            launch.params.len()
        )));
    }
    let nwarps = threads.div_ceil(32);
    let reg_bytes = u64::from(k.nregs) * 256 * nwarps;
    if reg_bytes > MAX_BLOCK_STATE {
        return Err(invalid(format!(
            "the kernel's {} registers need {reg_bytes} bytes per block; reduce the block size",
            k.nregs
        )));
    }
    if u64::from(k.local_bytes) > MAX_LOCAL_PER_THREAD {
        return Err(invalid(format!(
            "{} bytes of local memory per thread exceed {MAX_LOCAL_PER_THREAD}",
            k.local_bytes
        )));
    }
    if launch.globals.len() < module.globals().len() {
        return Err(invalid(format!(
            "{} global addresses given; the module has {} globals",
            launch.globals.len(),
            module.globals().len()
        )));
    }

    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let first: Mutex<Option<(u64, Fault)>> = Mutex::new(None);
    let lane_i = AtomicU64::new(0);
    let warp_i = AtomicU64::new(0);
    let worker = || {
        let mut ws = Worker {
            mem: Mem::new(mem, launch.params, out),
            shared: vec![0u64; shared.div_ceil(8) as usize],
            shared_len: shared,
            pool: Vec::new(),
        };
        let (mut li, mut wi) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                break;
            }
            let ctaid = [
                (b % u64::from(gx)) as u32,
                ((b / u64::from(gx)) % u64::from(gy)) as u32,
                (b / (u64::from(gx) * u64::from(gy))) as u32,
            ];
            ws.shared.fill(0);
            let r = run_block(k, launch, ctaid, &mut ws, &stop);
            li += r.1;
            wi += r.2;
            if let Err(mut f) = r.0 {
                f.kernel = name.clone();
                stop.store(true, Ordering::Relaxed);
                let mut g = first.lock().unwrap_or_else(|e| e.into_inner());
                if g.as_ref().is_none_or(|(fb, _)| b < *fb) {
                    *g = Some((b, f));
                }
                break;
            }
        }
        lane_i.fetch_add(li, Ordering::Relaxed);
        warp_i.fetch_add(wi, Ordering::Relaxed);
    };
    let workers = launch.workers.clamp(1, 256).min(blocks as usize);
    if workers <= 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(worker);
            }
        });
    }
    if let Some((_, f)) = first.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(f);
    }
    Ok(LaunchStats {
        lane_instructions: lane_i.into_inner(),
        warp_instructions: warp_i.into_inner(),
    })
}

/// Whether the launch's watchdog says stop (checked between warp time slices).
fn expired(launch: &Launch<'_>) -> bool {
    launch.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
        || launch.deadline.is_some_and(|d| Instant::now() >= d)
}

/// What one worker thread keeps from block to block.
struct Worker<'a> {
    mem: Mem<'a>,
    /// The block's shared memory (u64 words keep it 8-aligned).
    shared: Vec<u64>,
    shared_len: u64,
    /// Warps reused across blocks, so a block allocates nothing.
    pool: Vec<Warp>,
}

/// Runs one block to completion; returns the result and the instructions executed.
fn run_block(
    k: &Kernel,
    launch: &Launch<'_>,
    ctaid: [u32; 3],
    ws: &mut Worker<'_>,
    stop: &AtomicBool,
) -> (Result<(), Fault>, u64, u64) {
    let Worker {
        mem: m,
        shared,
        shared_len,
        pool,
    } = ws;
    let shared_len = *shared_len;
    let [bx, by, bz] = launch.block;
    let nwarps = (bx * by * bz).div_ceil(32);
    let place = |w| WarpPlace {
        block: launch.block,
        ctaid,
        grid: launch.grid,
        warp_index: w,
        shared_static: k.info.static_shared_bytes,
        shared_dynamic: launch.dynamic_shared_bytes,
    };
    if pool.len() < nwarps as usize {
        pool.resize_with(nwarps as usize, Warp::empty);
    }
    let warps = &mut pool[..nwarps as usize];
    for (w, warp) in warps.iter_mut().enumerate() {
        warp.reset(k, &place(w as u32), launch.globals, launch.params);
    }
    let bm = BlockMem {
        shared: shared.as_mut_ptr().cast(),
        shared_len,
    };
    let fault = |kind, w: &Warp, lane: usize, line| Fault {
        kind,
        kernel: String::new(),
        block: ctaid,
        thread: w.tid[lane],
        line,
    };
    let result = loop {
        let mut ran = false;
        let mut err = None;
        for w in warps.iter_mut() {
            if !w.runnable() {
                continue;
            }
            ran = true;
            match w.run(k, m, &bm, SLICE) {
                Ok(Stop::Blocked | Stop::Slice) => {}
                Err(f) => {
                    err = Some(fault(f.kind, w, f.lane, f.line));
                    break;
                }
            }
        }
        if let Some(e) = err {
            break Err(e);
        }
        if ran {
            if stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            if expired(launch) {
                break Err(Fault {
                    kind: FaultKind::Timeout,
                    kernel: String::new(),
                    block: ctaid,
                    thread: [0; 3],
                    line: 0,
                });
            }
            continue;
        }
        // Nothing can run: everyone has exited or waits at a barrier.
        let mut lanes_at_bar = warps.iter().enumerate().flat_map(|(i, w)| {
            (0..32)
                .filter(move |l| w.at_bar >> l & 1 != 0)
                .map(move |l| (i, l))
        });
        let Some((w0, l0)) = lanes_at_bar.next() else {
            break Ok(());
        };
        let id0 = warps[w0].bar_id[l0];
        if let Some((wi, lane)) = lanes_at_bar.find(|&(i, l)| warps[i].bar_id[l] != id0) {
            let w = &warps[wi];
            let line = k
                .code
                .get(w.lane_pc[lane].saturating_sub(1) as usize)
                .map_or(0, |i| i.line);
            break Err(fault(FaultKind::BarrierDivergence, w, lane, line));
        }
        for w in warps.iter_mut() {
            w.release();
        }
    };
    let li = warps.iter().map(|w| w.lane_instructions).sum();
    let wi = warps.iter().map(|w| w.warp_instructions).sum();
    (result, li, wi)
}
