//! Test guest of `buffer.read-stream` (and `stream.read-after`), one mode per argv[1]: checks what the host answered,
//! prints `<mode> ok` and exits 0; anything unexpected is printed and exits 1. `oob-pointer`
//! traps on purpose, `read-forever` never ends.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use gpuhost_guest::wit_stream::StreamPayload;
use gpuhost_guest::{Buffer, Error, Stream};

const MIB: usize = 1 << 20;

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(1)
}

fn check<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(&format!("{what}: {e:?}")))
}

/// `len` bytes that differ with `seed` and position.
fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|j| (j * 7 + seed) as u8).collect()
}

/// Polls `f` once (after `reading.wait`, the host never leaves a read of this stream pending).
fn once<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => fail("a read of the stream was left pending"),
    }
}

/// Sizes around the staging's chunk edges (512 KiB quarter chunks, 8 MiB chunks) up to 64 MiB,
/// at an odd offset, appended after bytes already in the Vec.
fn round_trips() {
    let buf = check(Buffer::create(64 * MIB as u64 + 1), "alloc");
    let sizes = [
        0,
        1,
        3,
        4095,
        100_000,
        MIB / 2 - 1,
        MIB / 2,
        MIB / 2 + 1,
        3 * MIB + 123,
        8 * MIB - 1,
        8 * MIB,
        8 * MIB + 1,
        64 * MIB,
    ];
    for (i, len) in sizes.into_iter().enumerate() {
        let data = pattern(len, i);
        check(buf.write(1, &data), "write");
        let mut out = vec![0xA5; 3];
        check(buf.read_into(1, len as u64, &mut out), "read_into");
        if out[..3] != [0xA5; 3] || out[3..] != data[..] {
            fail(&format!("{len} bytes read through the stream differ"));
        }
    }
    let whole = pattern(64 * MIB, 99);
    check(buf.write(0, &whole), "write");
    if check(buf.read_to_vec(0, whole.len() as u64), "read_to_vec") != whole {
        fail("the whole buffer read through the stream differs");
    }
}

/// Out-of-range reads give typed errors and leave nothing open; at most two reads are open.
fn errors() {
    let buf = check(Buffer::create(4096), "alloc");
    let bad = [(4097, 0), (4096, 1), (1, 4096), (u64::MAX, 2)];
    for (offset, len) in bad {
        match buf.read_stream(offset, len) {
            Err(Error::OutOfBounds(_)) => {}
            Err(e) => fail(&format!("read-stream({offset}, {len}): wrong error {e:?}")),
            Ok(_) => fail(&format!("read-stream({offset}, {len}) succeeded")),
        }
    }
    match buf.read_stream(0, (64 * MIB + 1) as u64) {
        Err(Error::QuotaExceeded(_)) => {}
        other => fail(&format!(
            "a read over the transfer limit: {:?}",
            other.err()
        )),
    }
    let first = check(buf.read_stream(0, 4096), "first open read");
    let second = check(buf.read_stream(0, 4096), "second open read");
    match buf.read_stream(0, 4096) {
        Err(Error::QuotaExceeded(_)) => {}
        other => fail(&format!("a third open read: {:?}", other.err())),
    }
    // A read's place is held until both its handles are gone.
    drop(first.1);
    match buf.read_stream(0, 4096) {
        Err(Error::QuotaExceeded(_)) => {}
        other => fail(&format!("a read whose reading lives on: {:?}", other.err())),
    }
    drop(first.0);
    drop(second);
    let data = pattern(4096, 5);
    check(buf.write(0, &data), "write");
    if check(buf.read_to_vec(0, 4096), "read after the refusals") != data {
        fail("the read after the refusals differs");
    }
}

/// `stream.read-after` on a stream with no launches: reads up to 64 KiB (queued on the stream,
/// into a pooled region) and larger ones (staged on the transfer stream) round trip at an odd
/// offset; bad ranges and reads over the transfer limit get typed errors.
fn read_after() {
    let buf = check(Buffer::create(3 * MIB as u64 + 1), "alloc");
    let stream = check(Stream::create(), "stream");
    for (i, len) in [0, 1, 4, 4095, 64 << 10, (64 << 10) + 1, 3 * MIB].into_iter().enumerate() {
        let data = pattern(len, i);
        check(buf.write(1, &data), "write");
        if check(stream.read_after(&buf, 1, len as u64), "read-after") != data {
            fail(&format!("{len} bytes read after the stream differ"));
        }
    }
    for (offset, len) in [(3 * MIB as u64 + 2, 0), (3 * MIB as u64, 2), (u64::MAX, 2)] {
        match stream.read_after(&buf, offset, len) {
            Err(Error::OutOfBounds(_)) => {}
            other => fail(&format!("read-after({offset}, {len}): {:?}", other.err())),
        }
    }
    match stream.read_after(&buf, 0, (64 * MIB + 1) as u64) {
        Err(Error::QuotaExceeded(_)) => {}
        other => fail(&format!("a read-after over the transfer limit: {:?}", other.err())),
    }
}

/// Opens 64 MiB reads, takes a few bytes and drops them (stream first, or reading first), many
/// times over: every one gives its place and staging back.
fn drop_midway() {
    let buf = check(Buffer::create(64 * MIB as u64), "alloc");
    let data = pattern(64 * MIB, 3);
    check(buf.write(0, &data), "write");
    for i in 0..20 {
        let (reading, mut bytes) = check(buf.read_stream(0, 64 * MIB as u64), "open");
        if check(reading.wait(), "wait") == 0 {
            fail("a 64 MiB read had nothing to give");
        }
        let (_, got) = once(bytes.read(Vec::with_capacity(4096 + i)));
        if got[..] != data[..got.len()] {
            fail("the first bytes of a dropped read differ");
        }
        if i % 2 == 0 {
            drop(bytes);
            drop(reading);
        } else {
            drop(reading);
            drop(bytes);
        }
    }
    if check(buf.read_to_vec(0, 64 * MIB as u64), "read after the drops") != data {
        fail("the read after the drops differs");
    }
}

/// A read left open and undrained holds its staging: another read still completes, and then
/// the first.
fn starved() {
    let buf = check(Buffer::create(64 * MIB as u64), "alloc");
    let data = pattern(64 * MIB, 13);
    check(buf.write(0, &data), "write");
    let (reading, mut bytes) = check(buf.read_stream(0, 64 * MIB as u64), "open the first");
    check(reading.wait(), "wait on the first");
    if check(buf.read_to_vec(0, 64 * MIB as u64), "read beside it") != data {
        fail("the read beside an undrained one differs");
    }
    let mut out = Vec::with_capacity(64 * MIB);
    while check(reading.wait(), "wait") > 0 {
        out = once(bytes.read(out)).1;
    }
    if out != data {
        fail("the undrained read, drained at last, differs");
    }
}

/// Reads straight into the middle of a canary-filled region, through the raw `stream.read`:
/// the host writes the bytes it reports inside the window handed over, and nothing outside it.
fn canary() {
    let buf = check(Buffer::create(4 * MIB as u64), "alloc");
    let data = pattern(4 * MIB, 11);
    check(buf.write(0, &data), "write");
    let vt = <u8 as StreamPayload>::VTABLE;
    for cap in [1usize, 3, 4097, MIB + 5] {
        let (reading, bytes) = check(buf.read_stream(0, 4 * MIB as u64), "open");
        let handle = bytes.take_handle();
        let mut region = vec![0xEEu8; 3 * cap];
        let ready = check(reading.wait(), "wait") as usize;
        // SAFETY: the window `region[cap..2 * cap]` is live and writable for the call, which
        // returns only once the host is done with it (`wait` said bytes were there).
        let code = unsafe { (vt.start_read)(handle, region.as_mut_ptr().add(cap), cap) };
        if code == u32::MAX {
            fail("a raw read after wait was left pending");
        }
        let got = (code >> 4) as usize;
        // `ready` is what had landed at `wait`; more may have by the read (never past `cap`).
        if got == 0 || got > cap || got < cap.min(ready) {
            fail(&format!(
                "{got} bytes into a {cap}-byte window with {ready} ready"
            ));
        }
        if region[cap..cap + got] != data[..got] {
            fail(&format!("the bytes read into a {cap}-byte window differ"));
        }
        if region[..cap]
            .iter()
            .chain(&region[cap + got..])
            .any(|&b| b != 0xEE)
        {
            fail(&format!(
                "the host wrote outside a {cap}-byte window ({got} bytes read)"
            ));
        }
        // SAFETY: `handle` is this stream's readable end, taken from its reader above.
        unsafe { (vt.drop_readable)(handle) };
    }
}

/// Hands the host a read window that runs past the end of linear memory: wasmtime traps the
/// guest before the host sees it.
fn oob_pointer() -> ! {
    let buf = check(Buffer::create(MIB as u64), "alloc");
    let (_reading, bytes) = check(buf.read_stream(0, MIB as u64), "open");
    let handle = bytes.take_handle();
    let end = core::arch::wasm32::memory_size(0) * 65536;
    let vt = <u8 as StreamPayload>::VTABLE;
    println!("reading past the end");
    // SAFETY: none; the point is a window outside this guest's memory, which must trap.
    let code = unsafe { (vt.start_read)(handle, (end - 16) as *mut u8, 4096) };
    fail(&format!("a read past the end of memory returned {code:#x}"))
}

/// Reads 64 MiB over and over, after saying so: a run to drop midway through a read.
fn read_forever() -> ! {
    let buf = check(Buffer::create(64 * MIB as u64), "alloc");
    let mut out = Vec::with_capacity(64 * MIB);
    println!("reading");
    loop {
        out.clear();
        check(buf.read_into(0, 64 * MIB as u64, &mut out), "read");
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "round-trips" => round_trips(),
        "errors" => errors(),
        "read-after" => read_after(),
        "drop-midway" => drop_midway(),
        "canary" => canary(),
        "starved" => starved(),
        "oob-pointer" => oob_pointer(),
        "read-forever" => read_forever(),
        other => fail(&format!("unknown mode {other:?}; see src/main.rs")),
    }
    println!("{mode} ok");
}
