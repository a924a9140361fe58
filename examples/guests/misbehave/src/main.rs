//! Test guests, one per mode (argv[1]). Each checks that the host answered its mistake with the
//! right `gpuhost:cuda` error case, prints `<mode> ok`, and exits 0; an unexpected answer is
//! printed and exits 1. `trap`, `leak` and `spin` end badly on purpose; `bench` times launches.

use gpuhost_guest::{Buffer, DeviceBuffer, Error, Launch, Module, Stream, raw};
use std::time::Instant;

const NOOP: &str = include_str!("../../kernels/noop.ptx");

/// Fails the guest with a message unless `got` is the error case `want` names.
macro_rules! expect_err {
    ($got:expr, $pat:pat, $what:expr) => {
        match $got {
            Err($pat) => {}
            Err(other) => fail(&format!("{}: wrong error {other:?}", $what)),
            Ok(_) => fail(&format!("{}: succeeded but should have failed", $what)),
        }
    };
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(1)
}

fn check<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(&format!("{what}: {e:?}")))
}

/// One small buffer, module, stream and launch: the unit of the leak test.
fn tiny() {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let buf = check(DeviceBuffer::<f32>::zeroed(1024), "alloc");
    let stream = check(Stream::create(), "stream");
    check(
        Launch::new(&noop)
            .grid1(4)
            .block1(256)
            .buffer(&buf)
            .scalar(1024u32)
            .enqueue(&stream),
        "launch",
    );
    check(stream.synchronize(), "synchronize");
    let back = check(buf.download_range(1000, 24), "download");
    if back.iter().any(|v| *v != 0.0) {
        fail("tiny: zeroed buffer read back non-zero");
    }
}

/// Takes one of everything and exits without dropping any of it.
fn hold_everything() {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let buf = check(DeviceBuffer::<f32>::zeroed(4096), "alloc");
    let stream = check(Stream::create(), "stream");
    let start = check(stream.record_event(), "record");
    check(
        Launch::new(&noop)
            .grid1(16)
            .block1(256)
            .buffer(&buf)
            .scalar(4096u32)
            .enqueue(&stream),
        "launch",
    );
    let end = check(stream.record_event(), "record");
    std::mem::forget((module, noop, buf, stream, start, end));
}

fn oob() {
    let buf = check(Buffer::create(64), "alloc");
    let other = check(Buffer::create(16), "alloc");
    expect_err!(
        buf.write(60, &[0; 8]),
        Error::OutOfBounds(_),
        "write past end"
    );
    expect_err!(
        buf.write(u64::MAX, &[0; 1]),
        Error::OutOfBounds(_),
        "write at overflowing offset"
    );
    expect_err!(buf.read(0, 65), Error::OutOfBounds(_), "read past end");
    expect_err!(
        buf.read(u64::MAX - 1, 4),
        Error::OutOfBounds(_),
        "read overflowing range"
    );
    expect_err!(buf.fill(1, 64, 0), Error::OutOfBounds(_), "fill past end");
    expect_err!(
        buf.copy_from(0, &other, 8, 16),
        Error::OutOfBounds(_),
        "copy from past source end"
    );
    expect_err!(
        other.copy_from(8, &buf, 0, 16),
        Error::OutOfBounds(_),
        "copy past destination end"
    );
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let stream = check(Stream::create(), "stream");
    let arg = raw::stream::Arg::Buffer(raw::stream::BufferArg {
        buffer: &buf,
        offset: 65,
    });
    expect_err!(
        Launch::new(&noop).arg(arg).scalar(1u32).enqueue(&stream),
        Error::OutOfBounds(_),
        "buffer arg past end"
    );
    // The buffer still works after every refused call.
    check(buf.write(56, &[7; 8]), "write in range");
    if check(buf.read(56, 8), "read in range") != [7; 8] {
        fail("read back wrong bytes after refused calls");
    }
}

fn bad_args() {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let params = noop.params();
    if params.len() != 2 || params[0].size != 8 || params[1].size != 4 {
        fail(&format!("noop params reported as {params:?}"));
    }
    let buf = check(DeviceBuffer::<f32>::zeroed(16), "alloc");
    let stream = check(Stream::create(), "stream");
    expect_err!(
        Launch::new(&noop).buffer(&buf).enqueue(&stream),
        Error::ArgMismatch(_),
        "too few args"
    );
    expect_err!(
        Launch::new(&noop)
            .buffer(&buf)
            .scalar(1u32)
            .scalar(2u32)
            .enqueue(&stream),
        Error::ArgMismatch(_),
        "too many args"
    );
    expect_err!(
        Launch::new(&noop)
            .buffer(&buf)
            .scalar(1u64)
            .enqueue(&stream),
        Error::ArgMismatch(_),
        "u64 for a u32 param"
    );
    expect_err!(
        Launch::new(&noop)
            .scalar(0u32)
            .scalar(1u32)
            .enqueue(&stream),
        Error::ArgMismatch(_),
        "u32 for a pointer param"
    );
    check(
        Launch::new(&noop)
            .buffer(&buf)
            .scalar(16u32)
            .enqueue(&stream),
        "valid launch after refusals",
    );
    check(stream.synchronize(), "synchronize");
}

fn bad_launch() {
    let info = gpuhost_guest::device_info();
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let buf = check(DeviceBuffer::<f32>::zeroed(16), "alloc");
    let stream = check(Stream::create(), "stream");
    let l = || Launch::new(&noop);
    let go = |launch: Launch<'_>| launch.buffer(&buf).scalar(16u32).enqueue(&stream);
    expect_err!(go(l().block1(0)), Error::InvalidLaunch(_), "zero block");
    expect_err!(go(l().grid(1, 0, 1)), Error::InvalidLaunch(_), "zero grid");
    expect_err!(
        go(l().block1(info.max_threads_per_block + 1)),
        Error::InvalidLaunch(_),
        "block over max threads"
    );
    expect_err!(
        go(l().block(1, 1, info.max_block_dim.z + 1)),
        Error::InvalidLaunch(_),
        "block z over max"
    );
    if info.max_grid_dim.y < u32::MAX {
        expect_err!(
            go(l().grid(1, info.max_grid_dim.y + 1, 1)),
            Error::InvalidLaunch(_),
            "grid y over max"
        );
    }
    expect_err!(
        go(l().shared_mem(info.max_shared_mem_per_block + 1)),
        Error::InvalidLaunch(_),
        "shared memory over max"
    );
    check(go(l().grid1(1).block1(32)), "valid launch after refusals");
    check(stream.synchronize(), "synchronize");
}

fn bad_ptx() {
    expect_err!(
        Module::from_ptx("this is not ptx"),
        Error::InvalidPtx(_),
        "garbage PTX"
    );
    let truncated = &NOOP[..NOOP.len() / 2];
    expect_err!(
        Module::from_ptx(truncated),
        Error::InvalidPtx(_),
        "truncated PTX"
    );
    expect_err!(
        Module::from_cubin(&[0xde, 0xad, 0xbe, 0xef]),
        Error::InvalidModule(_) | Error::NotSupported(_),
        "garbage cubin"
    );
    let module = check(Module::from_ptx(NOOP), "valid PTX after refusals");
    expect_err!(
        module.kernel("no_such_kernel"),
        Error::KernelNotFound(_),
        "missing kernel"
    );
}

fn over_quota() {
    let q = gpuhost_guest::quotas();
    expect_err!(
        Buffer::create(q.max_buffer_bytes + 1),
        Error::QuotaExceeded(_),
        "one buffer over the byte quota"
    );
    let mut held = Vec::new();
    let mut refused = false;
    for _ in 0..=q.max_buffers {
        match Buffer::create(16) {
            Ok(b) => held.push(b),
            Err(Error::QuotaExceeded(_)) => {
                refused = true;
                break;
            }
            Err(e) => fail(&format!("buffer count: wrong error {e:?}")),
        }
    }
    if !refused || held.len() != q.max_buffers as usize {
        fail(&format!(
            "buffer count quota not enforced: held {} of {}",
            held.len(),
            q.max_buffers
        ));
    }
    // Dropping one frees a slot.
    held.pop();
    check(Buffer::create(16), "buffer after freeing a slot");
    let mut modules = Vec::new();
    let mut refused = false;
    for _ in 0..=q.max_modules {
        match Module::from_ptx(NOOP) {
            Ok(m) => modules.push(m),
            Err(Error::QuotaExceeded(_)) => {
                refused = true;
                break;
            }
            Err(e) => fail(&format!("module count: wrong error {e:?}")),
        }
    }
    if !refused {
        fail("module quota not enforced");
    }
    let big = " ".repeat(q.max_ptx_bytes as usize + 1);
    drop(modules);
    expect_err!(
        Module::from_ptx(&big),
        Error::QuotaExceeded(_),
        "PTX over the size limit"
    );
}

/// Events: time a launch, and order a second stream after the first with `wait`.
fn events() {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let buf = check(DeviceBuffer::<f32>::zeroed(1024), "alloc");
    let (s1, s2) = (
        check(Stream::create(), "stream 1"),
        check(Stream::create(), "stream 2"),
    );
    let launch = |s: &Stream| {
        Launch::new(&noop)
            .grid1(4)
            .block1(256)
            .buffer(&buf)
            .scalar(1024u32)
            .enqueue(s)
    };
    let start = check(s1.record_event(), "record start");
    check(launch(&s1), "launch on stream 1");
    let end = check(s1.record_event(), "record end");
    check(s2.wait(&end), "stream 2 waits for stream 1");
    check(launch(&s2), "launch on stream 2");
    check(s2.synchronize(), "synchronize stream 2");
    check(s1.synchronize(), "synchronize stream 1");
    let ms = check(end.elapsed_ms_since(&start), "elapsed");
    if !(ms >= 0.0 && ms.is_finite()) {
        fail(&format!("elapsed time {ms} ms is not a duration"));
    }
    println!("events elapsed_ms={ms}");
}

/// Prints what the guest is told about its device, for the test to compare with the host's.
fn info() {
    let i = gpuhost_guest::device_info();
    let m = check(raw::device::memory(), "memory");
    if m.free > m.total || m.total == 0 {
        fail(&format!("memory info {m:?} is inconsistent"));
    }
    println!(
        "info name={:?} sm={} max_threads={} max_block_x={} max_grid_x={} cc={}.{}",
        i.name,
        i.sm_count,
        i.max_threads_per_block,
        i.max_block_dim.x,
        i.max_grid_dim.x,
        i.compute_capability_major,
        i.compute_capability_minor
    );
}

/// Launches per burst in `bench`: enqueued back to back, timed as one, then synchronized.
const BURST: usize = 32;

/// Times, in nanoseconds (medians over `n` samples each):
/// - `launch_ns`: one launch onto an idle stream (synchronized before each);
/// - `burst_ns`: one launch within a burst of `BURST`, timed per burst (one clock pair per
///   burst, so the clock's own cost is amortised as on the native side);
/// - `roundtrip_ns`: one launch plus `synchronize`;
/// - `clock_ns`: a clock read pair (the WASI clock is a host call, not a vDSO read);
/// - `import_ns`: the bare import round trip (`buffer.len`), timed per 64 calls.
fn bench(n: usize) {
    let module = check(Module::from_ptx(NOOP), "load noop");
    let noop = check(module.kernel("noop"), "kernel noop");
    let buf = check(DeviceBuffer::<f32>::zeroed(256), "alloc");
    let stream = check(Stream::create(), "stream");
    let median = |mut v: Vec<u128>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let launch = || {
        check(
            Launch::new(&noop)
                .block1(32)
                .buffer(&buf)
                .scalar(256u32)
                .enqueue(&stream),
            "launch",
        )
    };
    let (mut single, mut round, mut clock) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        clock.push(t.elapsed().as_nanos());
        let t0 = Instant::now();
        launch();
        single.push(t0.elapsed().as_nanos());
        check(stream.synchronize(), "synchronize");
        round.push(t0.elapsed().as_nanos());
    }
    let mut burst = Vec::new();
    for _ in 0..n.div_ceil(BURST) {
        let t0 = Instant::now();
        for _ in 0..BURST {
            launch();
        }
        burst.push(t0.elapsed().as_nanos() / BURST as u128);
        check(stream.synchronize(), "synchronize");
    }
    let mut import = Vec::new();
    for _ in 0..n.div_ceil(64) {
        let t0 = Instant::now();
        for _ in 0..64 {
            std::hint::black_box(buf.raw().len());
        }
        import.push(t0.elapsed().as_nanos() / 64);
    }
    println!(
        "bench launch_ns={} burst_ns={} roundtrip_ns={} clock_ns={} import_ns={} samples={n}",
        median(single),
        median(burst),
        median(round),
        median(clock),
        median(import)
    );
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "tiny" => tiny(),
        "leak" => {
            hold_everything();
            println!("leak ok");
            std::process::exit(0);
        }
        "trap" => {
            hold_everything();
            // panic = "abort": this becomes a wasm trap while everything is still held.
            panic!("trap guest: trapping on purpose with resources held");
        }
        "spin" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "oob" => oob(),
        "events" => events(),
        "info" => info(),
        "bad-args" => bad_args(),
        "bad-launch" => bad_launch(),
        "bad-ptx" => bad_ptx(),
        "over-quota" => over_quota(),
        "bench" => bench(
            std::env::args()
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(1000),
        ),
        other => fail(&format!("unknown mode {other:?}; see src/main.rs")),
    }
    println!("{mode} ok");
}
