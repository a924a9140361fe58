//! Test guests, one per mode (argv[1]). Each checks that the host answered its mistake with the
//! right `gpuhost:cuda` error case, prints `<mode> ok`, and exits 0; an unexpected answer is
//! printed and exits 1. `trap`, `leak` and `spin` end badly on purpose.

mod raw_args;
mod widths;

use gpuhost_guest::{Buffer, DeviceBuffer, Error, Launch, Module, Scalar, Stream, raw};

const NOOP: &str = include_str!("../../../../../../examples/guests/kernels/noop.ptx");
const SAXPY: &str = include_str!("../../../../../../examples/guests/kernels/saxpy.ptx");

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

/// One small buffer, module, stream and launch: the unit of the leak test. With `synchronize`
/// false the stream is dropped right after the launch, which may still run.
fn tiny(synchronize: bool) {
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
    if synchronize {
        check(stream.synchronize(), "synchronize");
    }
    drop(stream);
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
    let bound = check(
        Launch::new(&noop)
            .block1(32)
            .buffer(&buf)
            .scalar(32u32)
            .bind(),
        "bind",
    );
    check(stream.enqueue(&bound), "enqueue bound");
    std::mem::forget((module, noop, buf, stream, start, end, bound));
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
    if gpuhost_guest::quotas().sandboxed {
        // A sandboxed guest may load PTX only, whatever the image.
        expect_err!(
            Module::from_cubin(&[0xde, 0xad, 0xbe, 0xef]),
            Error::BinaryRefused(_),
            "cubin in the sandbox"
        );
    } else {
        expect_err!(
            Module::from_cubin(&[0xde, 0xad, 0xbe, 0xef]),
            Error::InvalidModule(_) | Error::NotSupported(_),
            "garbage cubin"
        );
    }
    let module = check(Module::from_ptx(NOOP), "valid PTX after refusals");
    expect_err!(
        module.kernel("no_such_kernel"),
        Error::KernelNotFound(_),
        "missing kernel"
    );
}

/// Bound launches: checked at bind and at each change (a refused change keeps the old value),
/// correct results when enqueued again with a changed scalar, and the module and buffers they
/// hold stay alive and counted after the guest drops its own handles.
/// A guest-side launch kept prepared (the SDK's `Launch`, not consumed by `enqueue`): enqueued
/// again with a scalar changed in between and then into another buffer; an index it lacks is
/// refused in the guest, and an argument of the wrong width by the host at the enqueue.
fn prepared() {
    let module = check(Module::from_ptx(SAXPY), "load saxpy");
    let saxpy = check(module.kernel("saxpy"), "kernel saxpy");
    let x = check(DeviceBuffer::from_slice(&[1.0f32; 64]), "x");
    let y = check(DeviceBuffer::<f32>::zeroed(64), "y");
    let z = check(DeviceBuffer::<f32>::zeroed(64), "z");
    let stream = check(Stream::create(), "stream");
    let mut launch = Launch::new(&saxpy)
        .grid1(1)
        .block1(64)
        .scalar(2.0f32)
        .buffer(&x)
        .buffer(&y)
        .scalar(64u32);
    expect_err!(
        launch.set_scalar(4, 1u32),
        Error::ArgMismatch(_),
        "set argument 4 of 4"
    );
    // y = 2x + y over all 64, then over the first 32 only; then z = 3x + z over the first 32.
    check(launch.enqueue(&stream), "enqueue");
    check(launch.set_scalar(3, 32u32), "set n");
    check(launch.enqueue(&stream), "enqueue again");
    check(launch.set_buffer(2, &z), "set y to z");
    check(launch.set_scalar(0, 3.0f32), "set a");
    check(launch.enqueue(&stream), "enqueue into z");
    check(launch.set_scalar(3, 32u64), "set n as a u64");
    expect_err!(
        launch.enqueue(&stream),
        Error::ArgMismatch(_),
        "enqueue with a u64 for a u32"
    );
    check(stream.synchronize(), "synchronize");
    let got = check(y.download(), "download y");
    if got
        .iter()
        .enumerate()
        .any(|(i, &v)| v != if i < 32 { 4.0 } else { 2.0 })
    {
        fail(&format!("prepared saxpy into y gave {got:?}"));
    }
    let got = check(z.download(), "download z");
    if got
        .iter()
        .enumerate()
        .any(|(i, &v)| v != if i < 32 { 3.0 } else { 0.0 })
    {
        fail(&format!("prepared saxpy into z gave {got:?}"));
    }
}

fn bound() {
    let module = check(Module::from_ptx(SAXPY), "load saxpy");
    let saxpy = check(module.kernel("saxpy"), "kernel saxpy");
    let n = 64u32;
    let x = check(DeviceBuffer::from_slice(&vec![1.0f32; 64]), "x");
    let y = check(DeviceBuffer::<f32>::zeroed(64), "y");
    let stream = check(Stream::create(), "stream");
    fn args(l: Launch<'_>) -> Launch<'_> {
        l.grid1(1).block1(64).scalar(2.0f32)
    }
    expect_err!(
        args(Launch::new(&saxpy)).buffer(&x).buffer(&y).bind(),
        Error::ArgMismatch(_),
        "bind with an argument missing"
    );
    expect_err!(
        args(Launch::new(&saxpy))
            .buffer(&x)
            .buffer(&y)
            .scalar(1u64)
            .bind(),
        Error::ArgMismatch(_),
        "bind with a u64 for a u32"
    );
    expect_err!(
        Launch::new(&saxpy)
            .block1(0)
            .scalar(2.0f32)
            .buffer(&x)
            .buffer(&y)
            .scalar(n)
            .bind(),
        Error::InvalidLaunch(_),
        "bind with a zero block"
    );
    expect_err!(
        args(Launch::new(&saxpy))
            .buffer(&x)
            .arg(raw::stream::Arg::Buffer(raw::stream::BufferArg {
                buffer: y.raw(),
                offset: 257,
            }))
            .scalar(n)
            .bind(),
        Error::OutOfBounds(_),
        "bind with a buffer offset past the end"
    );
    let before = gpuhost_guest::quotas();
    let bound = check(
        args(Launch::new(&saxpy))
            .buffer(&x)
            .buffer(&y)
            .scalar(n)
            .bind(),
        "bind",
    );
    expect_err!(
        bound.set_arg(4, &n.arg()),
        Error::ArgMismatch(_),
        "set argument 4 of 4"
    );
    expect_err!(
        bound.set_arg(0, &2.0f64.arg()),
        Error::ArgMismatch(_),
        "set an f64 for an f32"
    );
    let zero_block = raw::stream::LaunchConfig {
        grid: raw::types::Dim3 { x: 1, y: 1, z: 1 },
        block: raw::types::Dim3 { x: 0, y: 1, z: 1 },
        shared_mem_bytes: 0,
    };
    expect_err!(
        bound.set_config(zero_block),
        Error::InvalidLaunch(_),
        "set a zero block"
    );
    // y = 2x + y over all 64, then over the first 32 only (n changed between enqueues).
    check(stream.enqueue(&bound), "enqueue");
    check(bound.set_scalar(3, 32u32), "set n");
    check(stream.enqueue(&bound), "enqueue again");
    check(stream.synchronize(), "synchronize");
    let got = check(y.download(), "download y");
    let want: Vec<f32> = (0..64).map(|i| if i < 32 { 4.0 } else { 2.0 }).collect();
    if got != want {
        fail(&format!("bound saxpy gave {got:?}"));
    }
    // Point the output at another buffer and back: the replaced one stops counting with it.
    let z = check(DeviceBuffer::<f32>::zeroed(64), "z");
    check(bound.set_buffer(2, &z), "set y to z");
    check(stream.enqueue(&bound), "enqueue into z");
    check(stream.synchronize(), "synchronize");
    check(bound.set_buffer(2, &y), "set z back to y");
    let got = check(z.download(), "download z");
    if got
        .iter()
        .enumerate()
        .any(|(i, &v)| v != if i < 32 { 2.0 } else { 0.0 })
    {
        fail(&format!("bound saxpy into z gave {got:?}"));
    }
    drop(z);
    if gpuhost_guest::quotas().used_buffers != before.used_buffers {
        fail("a buffer replaced in a bound launch still counts after its handle is gone");
    }
    // Drop every handle but the bound launch: it still runs, and still counts what it holds.
    drop((x, y, saxpy, module));
    let held = gpuhost_guest::quotas();
    if held.used_buffers != before.used_buffers
        || held.used_modules != before.used_modules
        || held.used_kernels != before.used_kernels
    {
        fail(&format!(
            "a bound launch's buffers/module stopped counting: {held:?}"
        ));
    }
    check(
        stream.enqueue(&bound),
        "enqueue after dropping its buffers and module",
    );
    check(stream.synchronize(), "synchronize");
    drop(bound);
    let after = gpuhost_guest::quotas();
    if after.used_buffers != before.used_buffers - 2
        || after.used_modules != before.used_modules - 1
        || after.used_kernels != before.used_kernels - 1
    {
        fail(&format!(
            "dropping the bound launch freed nothing: {after:?}"
        ));
    }
}

/// A bound launch enqueued on the stream `set-stream` gave it: refused before it has one and
/// once the guest dropped it (also when a stream made later may have taken its slot), run as
/// `stream.enqueue` runs it otherwise, and moved to another stream by `set-stream` again.
fn bound_stream() {
    let module = check(Module::from_ptx(SAXPY), "load saxpy");
    let saxpy = check(module.kernel("saxpy"), "kernel saxpy");
    let x = check(DeviceBuffer::from_slice(&vec![1.0f32; 64]), "x");
    let y = check(DeviceBuffer::<f32>::zeroed(64), "y");
    let bound = check(
        Launch::new(&saxpy)
            .grid1(1)
            .block1(64)
            .scalar(2.0f32)
            .buffer(&x)
            .buffer(&y)
            .scalar(64u32)
            .bind(),
        "bind",
    );
    expect_err!(
        bound.enqueue(),
        Error::InvalidHandle(_),
        "enqueue before set-stream"
    );
    let first = check(Stream::create(), "stream");
    bound.set_stream(&first);
    check(bound.enqueue(), "enqueue on its stream");
    check(bound.enqueue(), "enqueue on its stream again");
    check(first.synchronize(), "synchronize");
    let got = check(y.download(), "download y");
    if got.iter().any(|&v| v != 4.0) {
        fail(&format!("two enqueues of y = 2x + y gave {got:?}"));
    }
    drop(first);
    expect_err!(
        bound.enqueue(),
        Error::InvalidHandle(_),
        "enqueue on a dropped stream"
    );
    // A stream made now may take the dropped one's slot: it is still not the launch's.
    let second = check(Stream::create(), "second stream");
    expect_err!(
        bound.enqueue(),
        Error::InvalidHandle(_),
        "enqueue on a dropped stream after another was made"
    );
    bound.set_stream(&second);
    check(bound.enqueue(), "enqueue on the second stream");
    check(second.synchronize(), "synchronize the second stream");
    let got = check(y.download(), "download y");
    if got.iter().any(|&v| v != 6.0) {
        fail(&format!("a third y = 2x + y gave {got:?}"));
    }
    // The launch does not keep its stream: both go, in either order, and nothing stays counted.
    let held = gpuhost_guest::quotas().used_streams_and_events;
    drop(second);
    if gpuhost_guest::quotas().used_streams_and_events != held - 1 {
        fail("a stream set on a bound launch still counts after its handle is gone");
    }
    drop(bound);
}

/// Makes things until a quota refuses one; fails unless that happens at exactly `limit`.
fn fill_to_quota<T>(what: &str, limit: u32, mut make: impl FnMut() -> Result<T, Error>) -> Vec<T> {
    let mut held = Vec::new();
    loop {
        match make() {
            Ok(t) if held.len() < limit as usize => held.push(t),
            Ok(_) => fail(&format!("{what}: quota of {limit} not enforced")),
            Err(Error::QuotaExceeded(_)) if held.len() == limit as usize => return held,
            Err(e) => fail(&format!(
                "{what}: refused after {} of {limit}: {e:?}",
                held.len()
            )),
        }
    }
}

fn over_quota() {
    let q = gpuhost_guest::quotas();
    expect_err!(
        Buffer::create(q.max_buffer_bytes + 1),
        Error::QuotaExceeded(_),
        "one buffer over the byte quota"
    );
    let mut held = fill_to_quota("buffers", q.max_buffers, || Buffer::create(16));
    // Dropping one frees a slot.
    held.pop();
    check(Buffer::create(16), "buffer after freeing a slot");
    drop(fill_to_quota("modules", q.max_modules, || {
        Module::from_ptx(NOOP)
    }));
    // A kernel keeps its module loaded, so it keeps it counted after the module handle goes.
    drop(fill_to_quota(
        "modules held by kernels",
        q.max_modules,
        || Module::from_ptx(NOOP).map(|m| check(m.kernel("noop"), "kernel of a fresh module")),
    ));
    let big = " ".repeat(q.max_ptx_bytes as usize + 1);
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

/// `buffer.write` then `buffer.read` of sizes from none to 64 MiB at an odd offset: the bytes
/// come back as written.
fn transfers() {
    const MOST: usize = 64 << 20;
    let buf = check(Buffer::create(MOST as u64 + 1), "alloc");
    for (i, len) in [0, 1, 4095, 100_000, (3 << 20) + 123, MOST]
        .into_iter()
        .enumerate()
    {
        let data: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
        check(buf.write(1, &data), "write");
        if check(buf.read(1, len as u64), "read") != data {
            fail(&format!(
                "transfers: {len} bytes read back differ from those written"
            ));
        }
    }
}

/// Zero fills read back zero however the buffer was written before: the host may skip a fill
/// of a buffer it knows is still zero, and must not once anything could have written it — a
/// `write`, or any kernel (a sandboxed one may write anywhere in its guest's memory: here
/// saxpy runs past `y` into `z`, created before the launch and never named by it). Run
/// sandboxed only: past `y` is another allocation's memory for a trusted guest.
fn zero_fills() {
    let zero = |b: &Buffer, what: &str| {
        if check(b.read(0, 256), what).iter().any(|&v| v != 0) {
            fail(&format!("zero-fills: {what} is not zero"));
        }
    };
    let fresh = check(DeviceBuffer::<f32>::zeroed(64), "zeroed");
    zero(fresh.raw(), "a zeroed buffer");
    check(fresh.upload(0, &[1.5; 64]), "upload");
    check(fresh.raw().fill(0, 256, 0), "fill after a write");
    zero(fresh.raw(), "a buffer filled after a write");

    let module = check(Module::from_ptx(SAXPY), "load saxpy");
    let saxpy = check(module.kernel("saxpy"), "kernel saxpy");
    let x = check(DeviceBuffer::from_slice(&[1.0f32; 128]), "x");
    let y = check(DeviceBuffer::<f32>::zeroed(64), "y");
    let z = check(Buffer::create(256), "z");
    let stream = check(Stream::create(), "stream");
    check(
        Launch::new(&saxpy)
            .grid1(1)
            .block1(128)
            .scalar(2.0f32)
            .buffer(&x)
            .buffer(&y)
            .scalar(128u32)
            .enqueue(&stream),
        "launch",
    );
    check(stream.synchronize(), "synchronize");
    if check(z.read(0, 256), "z after the launch")
        .iter()
        .all(|&v| v == 0)
    {
        fail("zero-fills: saxpy past y did not reach z (the arena's layout changed?)");
    }
    check(z.fill(0, 256, 0), "fill z");
    zero(
        &z,
        "a buffer a kernel wrote past its own arguments, filled after",
    );
}

/// Writes 64 MiB over and over, after saying so: a run to cancel midway through a write.
fn write_forever() -> ! {
    let data = vec![0x5Au8; 64 << 20];
    let buf = check(Buffer::create(data.len() as u64), "alloc");
    println!("writing");
    loop {
        check(buf.write(0, &data), "write");
    }
}

/// Writes of 24 MiB (several of the host's lock granules; argv[4] MiB when given) from one place in
/// this guest's memory, three times with new bytes each time (argv[2]: the first round's byte,
/// hex), each read back whole: the first is staged, later ones go straight from this memory once
/// the host locks it. Before filling it, the fresh memory is scanned for a page of another guest's
/// bytes (argv[3], hex): a memory reused from a guest that ended must come back zeroed.
fn locked_writes() {
    let arg = |i: usize| {
        let a = std::env::args().nth(i).unwrap_or_default();
        u8::from_str_radix(&a, 16).unwrap_or_else(|_| fail(&format!("argv[{i}] {a:?} is no hex byte")))
    };
    let (first, foreign) = (arg(2), arg(3));
    // Decimal: a guest smaller than the last one to use its memory leaves part of that guest's
    // locked pieces past its own size.
    let mib = match std::env::args().nth(4) {
        None => 24,
        Some(a) => a.parse::<usize>().unwrap_or_else(|_| fail(&format!("argv[4] {a:?} is no count of MiB"))),
    };
    let len = mib << 20;
    let mut data: Vec<u8> = Vec::with_capacity(len);
    // Every page of this memory, the new Vec's unwritten capacity included (page 0 skipped).
    let pages = core::arch::wasm32::memory_size(0) * 65536 / 4096;
    for p in 1..pages {
        let page = (p * 4096) as *const u64;
        // SAFETY: inside this guest's linear memory (below memory_size); plain loads of u64s.
        let all = (0..512).all(|w| unsafe { page.add(w).read_volatile() } == u64::from_ne_bytes([foreign; 8]));
        if all {
            fail(&format!("locked-writes: page {p} holds another guest's bytes {foreign:#x}"));
        }
    }
    data.resize(len, first);
    let buf = check(Buffer::create(len as u64 + 8), "alloc");
    for round in 0..3u8 {
        let byte = first ^ round.wrapping_mul(0x11);
        data.fill(byte);
        check(buf.write(3, &data), "write");
        if check(buf.read(3, len as u64), "read").iter().any(|&b| b != byte) {
            fail(&format!("locked-writes: round {round} read back other bytes than {byte:#x}"));
        }
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "tiny" => tiny(true),
        // Its stream dropped with its launch maybe still running.
        "unsynced" => tiny(false),
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
        "bound" => bound(),
        "bound-stream" => bound_stream(),
        "prepared" => prepared(),
        "transfers" => transfers(),
        "zero-fills" => zero_fills(),
        "write-forever" => write_forever(),
        "locked-writes" => locked_writes(),
        "widths" => widths::widths(),
        "raw-args" => raw_args::raw_args(&std::env::args().nth(2).unwrap_or_default()),
        other => fail(&format!("unknown mode {other:?}; see src/main.rs")),
    }
    println!("{mode} ok");
}
