//! Launch-overhead probe (issue #12): where gpuhost's launch issue and `.await` time goes.
//! Each launch-issue variant is the raw cuLaunchKernel plus one kind of work gpuhost does around
//! it (locked instructions before or after, a mutex, cold cache lines, a malloc), timed alone in
//! batches of 500 that alternate between variants; the `.await` variants hand the event query to
//! another thread, spinning or yielding, beside gpuhost's own. Medians in ns / µs.
//!
//! `launch_probe count CASE N` instead runs one case N times and exits, for instruction counts
//! on softcuda (scripts/probes/launch-instructions.sh runs it under callgrind, collecting only
//! inside the case's `issue_*` function): the launches are issued in batches of 500, kept and
//! drained outside that function, as the bench does. Cases: `gh1` / `raw1`, noop(u32) through
//! `Stream::launch` / cuLaunchKernel (the bench's launch-issue rows); `gh4` / `raw4`,
//! args4(buffer, buffer, u32, f32), a typical argument list; `enter`, `Host::enter`; `ctx`, a
//! bare cuCtxGetCurrent.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use gpuhost::sys::{self, CUresult};
use gpuhost::{Arg, Completion, LaunchConfig, ModuleImage, ModuleSource, Registry};

const PTX: &str = include_str!("../bundles/stamp-a/stamp.ptx");
/// A kernel with a typical argument list (two buffers, a count, a scale) that does nothing.
const PTX_ARGS4: &str = ".version 7.0
.target sm_80
.address_size 64
.visible .entry args4(
	.param .u64 args4_param_0,
	.param .u64 args4_param_1,
	.param .u32 args4_param_2,
	.param .f32 args4_param_3
)
{
	ret;
}
";

type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn ok(call: &str, r: CUresult) -> R {
    if r != CUresult::CUDA_SUCCESS {
        return Err(format!("{call}: {r:?}").into());
    }
    Ok(())
}

#[repr(align(128))]
struct Padded(AtomicU64);

struct Raw {
    func: sys::CUfunction,
    stream: sys::CUstream,
    event: sys::CUevent,
}
// SAFETY: driver handles, used with the context bound on each thread that uses them.
unsafe impl Send for Raw {}
// SAFETY: as above.
unsafe impl Sync for Raw {}

impl Raw {
    fn launch(&self) -> R {
        let mut n = 1u32;
        let mut p = [(&mut n as *mut u32).cast::<c_void>()];
        // SAFETY: one pointer per parameter of noop(u32), alive for the call.
        ok("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.func,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                self.stream,
                p.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }
    fn sync(&self) -> R {
        // SAFETY: our stream, context bound.
        ok("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.stream)
        })
    }
    fn record(&self) -> R {
        // SAFETY: our event and stream.
        ok("cuEventRecord", unsafe {
            sys::cuEventRecord(self.event, self.stream)
        })
    }
    fn query(&self) -> bool {
        // SAFETY: our event, recorded.
        unsafe { sys::cuEventQuery(self.event) != CUresult::CUDA_ERROR_NOT_READY }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> R {
    let host = gpuhost::host(0)?;
    let reg = Registry::from_sources(
        &host,
        "probe",
        vec![
            ModuleSource::new("stamp", ModuleImage::Ptx(PTX.into())),
            ModuleSource::new("args4", ModuleImage::Ptx(PTX_ARGS4.into())),
        ],
    )?;
    let noop = reg.kernel("noop")?;
    let stream = host.stream()?;
    host.enter()?;
    let text = std::ffi::CString::new(PTX)?;
    let mut module = ptr::null_mut();
    // SAFETY: context current; NUL-terminated PTX.
    ok("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
    })?;
    let mut raw = Raw {
        func: ptr::null_mut(),
        stream: ptr::null_mut(),
        event: ptr::null_mut(),
    };
    // SAFETY: module loaded above; out pointers valid.
    unsafe {
        ok(
            "cuModuleGetFunction",
            sys::cuModuleGetFunction(&mut raw.func, module, c"noop".as_ptr()),
        )?;
        ok("cuStreamCreate", sys::cuStreamCreate(&mut raw.stream, 1))?;
        ok("cuEventCreate", sys::cuEventCreate(&mut raw.event, 2))?;
    }
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };

    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("count") {
        let (Some(case), Some(n)) = (args.get(2), args.get(3).and_then(|a| a.parse().ok())) else {
            return Err("usage: launch_probe count gh1|gh4|raw1|raw4|enter|ctx N".into());
        };
        return count(&host, &reg, &raw, case, n);
    }
    let pads: Vec<Padded> = (0..4).map(|_| Padded(AtomicU64::new(0))).collect();
    let mutex = Mutex::new(0u64);
    let cold: Vec<u64> = vec![1; 8 << 20]; // 64 MiB
    let mut rng = 0x9e3779b97f4a7c15u64;
    let mut sink = 0u64;
    let pending = std::cell::RefCell::new(Vec::<Completion>::new());

    let names = [
        "raw",
        "raw; 1 lock xadd after",
        "1 lock xadd before; raw",
        "raw; 4 lock xadd after (4 lines)",
        "raw; mutex lock+unlock after",
        "raw; SeqCst store after",
        "raw; 8 cold-line reads after",
        "raw; Arc::new + drop after",
        "Host::enter; raw",
        "gpuhost Stream::launch",
        "raw; mfence after",
    ];
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let batch = 500;
    for round in 0..41 {
        for k in 0..names.len() {
            let v = (k + round) % names.len();
            for _ in 0..batch {
                let t = Instant::now();
                match v {
                    0 => raw.launch()?,
                    1 => {
                        raw.launch()?;
                        pads[0].0.fetch_add(1, Ordering::Relaxed);
                    }
                    2 => {
                        pads[0].0.fetch_add(1, Ordering::Relaxed);
                        raw.launch()?;
                    }
                    3 => {
                        raw.launch()?;
                        for p in &pads {
                            p.0.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    4 => {
                        raw.launch()?;
                        *mutex.lock().unwrap() += 1;
                    }
                    5 => {
                        raw.launch()?;
                        pads[1].0.store(round as u64, Ordering::SeqCst);
                    }
                    6 => {
                        raw.launch()?;
                        for _ in 0..8 {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            sink = sink.wrapping_add(cold[(rng as usize) % cold.len()]);
                        }
                    }
                    7 => {
                        raw.launch()?;
                        drop(std::hint::black_box(Arc::new([0u64; 4])));
                    }
                    8 => {
                        host.enter()?;
                        raw.launch()?;
                    }
                    9 => {
                        let c = stream.launch(&noop, cfg, &[Arg::U32(1)])?;
                        pending.borrow_mut().push(c);
                    }
                    _ => {
                        raw.launch()?;
                        std::sync::atomic::fence(Ordering::SeqCst);
                    }
                }
                if round > 0 {
                    lat[v].push(t.elapsed().as_nanos() as f64);
                }
            }
            raw.sync()?;
            stream.synchronize()?;
            for c in pending.borrow_mut().drain(..) {
                c.wait()?;
            }
        }
    }
    println!("launch issue, median ns (sink {})", sink % 7);
    for (n, v) in names.iter().zip(lat) {
        println!("| {n} | {:.0} |", median(v));
    }

    // .await: who notices the event, and how.
    let seq = Arc::new(Padded(AtomicU64::new(0)));
    let done = Arc::new(Padded(AtomicU64::new(0)));
    let mode = Arc::new(Padded(AtomicU64::new(0))); // 0 spin, 1 yield between queries, 2 stop
    let raw = Arc::new(raw);
    let helper = {
        let (seq, done, mode, raw, host) = (
            seq.clone(),
            done.clone(),
            mode.clone(),
            raw.clone(),
            host.clone(),
        );
        std::thread::spawn(move || -> Result<(), String> {
            host.enter().map_err(|e| e.to_string())?;
            let mut seen = 0;
            loop {
                let m = mode.0.load(Ordering::Acquire);
                if m == 2 {
                    return Ok(());
                }
                let s = seq.0.load(Ordering::Acquire);
                if s != seen && raw.query() {
                    seen = s;
                    done.0.store(s, Ordering::Release);
                }
                if m == 1 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let mut n_seq = 0u64;
    let mut handoff = |m: u64| -> R {
        mode.0.store(m, Ordering::Release);
        raw.launch()?;
        raw.record()?;
        n_seq += 1;
        seq.0.store(n_seq, Ordering::Release);
        let mut i = 0u32;
        while done.0.load(Ordering::Acquire) != n_seq {
            i += 1;
            if i.is_multiple_of(32) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
        Ok(())
    };
    let spin_poll = |budget_us: u64| -> R {
        host.set_await_spin(std::time::Duration::from_micros(budget_us));
        let mut f = std::pin::pin!(stream.launch(&noop, cfg, &[Arg::U32(1)])?);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
                return Ok(r?);
            }
            std::thread::yield_now();
        }
    };
    let anames = [
        "raw launch + sync",
        "raw launch + record + query loop",
        "raw launch + record + query loop, yield between queries",
        "raw launch + record, another thread query-loops (spinning), flag",
        "raw launch + record, another thread query-loops (yielding), flag",
        "gpuhost .await yielding, spin 10 µs",
        "gpuhost .await yielding, spin 0",
        "gpuhost launch + wait()",
    ];
    let mut alat: Vec<Vec<f64>> = vec![Vec::new(); anames.len()];
    for round in 0..101 {
        for (v, out) in alat.iter_mut().enumerate() {
            for _ in 0..50 {
                let t = Instant::now();
                match v {
                    0 => {
                        raw.launch()?;
                        raw.sync()?
                    }
                    1 => {
                        raw.launch()?;
                        raw.record()?;
                        while !raw.query() {
                            std::hint::spin_loop();
                        }
                    }
                    2 => {
                        raw.launch()?;
                        raw.record()?;
                        while !raw.query() {
                            std::thread::yield_now();
                        }
                    }
                    3 => handoff(0)?,
                    4 => handoff(1)?,
                    5 => spin_poll(10)?,
                    6 => spin_poll(0)?,
                    _ => stream.launch(&noop, cfg, &[Arg::U32(1)])?.wait()?,
                }
                if round > 0 {
                    out.push(t.elapsed().as_nanos() as f64 / 1000.0);
                }
            }
        }
    }
    mode.0.store(2, Ordering::Release);
    helper.join().map_err(|_| "helper panicked")??;
    println!("launch → completion, median µs");
    for (n, v) in anames.iter().zip(alat) {
        println!("| {n} | {:.2} |", median(v));
    }
    Ok(())
}

/// Launches are issued (and kept) in batches of this many, then drained, as the bench does.
const COUNT_BATCH: usize = 500;

/// `launch_probe count CASE N` (see the header).
fn count(host: &Arc<gpuhost::Host>, reg: &Arc<Registry>, raw: &Raw, case: &str, n: usize) -> R {
    let stream = host.stream()?;
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    let (a, b) = (host.alloc(1024)?, host.alloc(1024)?);
    let text = std::ffi::CString::new(PTX_ARGS4)?;
    let mut raw4 = ptr::null_mut();
    // SAFETY: the context is current (main entered the host on this thread); NUL-terminated PTX.
    ok("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut raw4, text.as_ptr().cast())
    })?;
    let mut func4 = ptr::null_mut();
    // SAFETY: raw4 loaded just above; out pointer valid.
    ok("cuModuleGetFunction", unsafe {
        sys::cuModuleGetFunction(&mut func4, raw4, c"args4".as_ptr())
    })?;
    let raw4 = Raw {
        func: func4,
        stream: raw.stream,
        event: raw.event,
    };
    let kernel = reg.kernel(if case == "gh4" { "args4" } else { "noop" })?;
    let mut left = n;
    while left > 0 {
        let k = left.min(COUNT_BATCH);
        let mut kept = Vec::with_capacity(k);
        match case {
            "gh1" => issue_gh1(&stream, &kernel, cfg, k, &mut kept)?,
            "gh4" => issue_gh4(&stream, &kernel, cfg, (&a, &b), k, &mut kept)?,
            "raw1" => issue_raw1(raw, k)?,
            "raw4" => issue_raw4(&raw4, (&a, &b), k)?,
            "enter" => issue_enter(host, k)?,
            "ctx" => issue_ctx(k)?,
            other => return Err(format!("unknown case {other}").into()),
        }
        stream.synchronize()?;
        raw.sync()?;
        for c in kept {
            c.wait()?;
        }
        left -= k;
    }
    Ok(())
}

#[inline(never)]
fn issue_gh1(
    stream: &gpuhost::Stream,
    k: &gpuhost::Kernel,
    cfg: LaunchConfig,
    n: usize,
    kept: &mut Vec<Completion>,
) -> R {
    for _ in 0..n {
        kept.push(stream.launch(k, cfg, &[Arg::U32(1)])?);
    }
    Ok(())
}

#[inline(never)]
fn issue_gh4(
    stream: &gpuhost::Stream,
    k: &gpuhost::Kernel,
    cfg: LaunchConfig,
    (a, b): (&gpuhost::DeviceBuffer, &gpuhost::DeviceBuffer),
    n: usize,
    kept: &mut Vec<Completion>,
) -> R {
    for _ in 0..n {
        let args = [
            Arg::Buffer(a, 0),
            Arg::Buffer(b, 0),
            Arg::U32(256),
            Arg::F32(2.0),
        ];
        kept.push(stream.launch(k, cfg, &args)?);
    }
    Ok(())
}

#[inline(never)]
fn issue_raw1(raw: &Raw, n: usize) -> R {
    for _ in 0..n {
        raw.launch()?;
    }
    Ok(())
}

#[inline(never)]
fn issue_raw4(raw: &Raw, (a, b): (&gpuhost::DeviceBuffer, &gpuhost::DeviceBuffer), n: usize) -> R {
    for _ in 0..n {
        let (mut pa, mut pb, mut count, mut scale) = (a.device_ptr(), b.device_ptr(), 256u32, 2f32);
        let mut p = [
            (&mut pa as *mut u64).cast::<c_void>(),
            (&mut pb as *mut u64).cast::<c_void>(),
            (&mut count as *mut u32).cast::<c_void>(),
            (&mut scale as *mut f32).cast::<c_void>(),
        ];
        // SAFETY: one pointer per parameter of args4, each to a value of its size, alive for
        // the call; the context is bound on this thread (main entered the host).
        ok("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                raw.func,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                raw.stream,
                p.as_mut_ptr(),
                ptr::null_mut(),
            )
        })?;
    }
    Ok(())
}

#[inline(never)]
fn issue_enter(host: &gpuhost::Host, n: usize) -> R {
    for _ in 0..n {
        std::hint::black_box(host.enter()?);
    }
    Ok(())
}

#[inline(never)]
fn issue_ctx(n: usize) -> R {
    for _ in 0..n {
        let mut ctx = ptr::null_mut();
        // SAFETY: valid out pointer.
        ok("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut ctx) })?;
        std::hint::black_box(ctx);
    }
    Ok(())
}
