//! Launch-overhead probe (issue #12): where gpuhost's launch issue and `.await` time goes.
//! Each launch-issue variant is the raw cuLaunchKernel plus one kind of work gpuhost does around
//! it (locked instructions before or after, a mutex, cold cache lines, a malloc), timed alone in
//! batches of 500 that alternate between variants; the `.await` variants hand the event query to
//! another thread, spinning or yielding, beside gpuhost's own. Medians in ns / µs.
//!
//! `launch_probe N` instead makes N gpuhost launches and N raw ones and exits: run it under
//! `valgrind --tool=callgrind --toggle-collect='gpuhost::stream::Stream::launch'` on softcuda to
//! count gpuhost's own instructions per launch (the count inside Stream::launch less the driver
//! calls it makes).

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use gpuhost::sys::{self, CUresult};
use gpuhost::{Arg, Completion, LaunchConfig, ModuleImage, ModuleSource, Registry};

const PTX: &str = include_str!("../bundles/stamp-a/stamp.ptx");

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
        vec![ModuleSource::new("stamp", ModuleImage::Ptx(PTX.into()))],
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

    if let Some(n) = std::env::args()
        .nth(1)
        .and_then(|a| a.parse::<usize>().ok())
    {
        // Instruction-count mode (softcuda under callgrind): n gpuhost launches then n raw ones,
        // in batches of 500 kept and drained as the bench does.
        for k in 0..2 {
            let mut left = n;
            while left > 0 {
                let b = left.min(500);
                let mut kept = Vec::with_capacity(b);
                for _ in 0..b {
                    if k == 0 {
                        kept.push(stream.launch(&noop, cfg, &[Arg::U32(1)])?);
                    } else {
                        raw.launch()?;
                    }
                }
                stream.synchronize()?;
                raw.sync()?;
                for c in kept {
                    c.wait()?;
                }
                left -= b;
            }
        }
        return Ok(());
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
