//! Test guest of graph batching (gpuhost-wasm's burst/), one scenario per mode (argv[1]). Each
//! prints what it observed — buffer contents after each synchronize, the error each refused
//! call returned — so the host test can compare a batched run with an unbatched one line by
//! line; it exits 1 only when a call that must succeed fails.

use gpuhost_guest::{DeviceBuffer, Error, Kernel, Launch, Module, Stream};

/// `mix(p, v)`: `*p = *p * 3 + v` (order-dependent); `add(p, v)`: `atomicAdd(p, v)` (any grid).
const PTX: &str = include_str!("../../../../../gpuhost/tests/fixtures/mix.ptx");

fn check<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{what}: {e:?}");
        std::process::exit(1)
    })
}

struct Kit {
    mix: Kernel,
    add: Kernel,
    _module: Module,
}

fn kit() -> Kit {
    let module = check(Module::from_ptx(PTX), "load");
    Kit {
        mix: check(module.kernel("mix"), "mix"),
        add: check(module.kernel("add"), "add"),
        _module: module,
    }
}

fn buf(v: u32) -> DeviceBuffer<u32> {
    check(DeviceBuffer::from_slice(&[v]), "alloc")
}

fn one(k: &Kernel, b: &DeviceBuffer<u32>, v: u32, s: &Stream) {
    check(
        Launch::new(k).block1(1).buffer(b).scalar(v).enqueue(s),
        "launch",
    );
}

/// Synchronizes `s` and prints the buffers' values under `label`.
fn show(label: &str, s: &Stream, bufs: &[&DeviceBuffer<u32>]) {
    check(s.synchronize(), "synchronize");
    let vals: Vec<u32> = bufs
        .iter()
        .map(|b| check(b.download(), "read")[0])
        .collect();
    println!("{label} {vals:?}");
}

/// Bursts with scalars changing, buffers changing, kernels interleaved, a burst longer than the
/// batch cap, events between bursts, bound launches with changed scalars, lone launches, and a
/// launch of a new shape in the middle of a collected burst.
fn results() {
    let k = kit();
    let (a, b, c) = (buf(1), buf(2), buf(3));
    let s = check(Stream::create(), "stream");
    for round in 0..6u32 {
        for i in 0..8u32 {
            let (kernel, target) = if i % 2 == 0 {
                (&k.mix, &a)
            } else {
                (&k.add, &b)
            };
            one(kernel, target, round * 10 + i, &s);
        }
        show(&format!("scalars {round}"), &s, &[&a, &b]);
    }
    for round in 0..4u32 {
        let (x, y) = if round % 2 == 0 { (&a, &c) } else { (&c, &a) };
        for i in 0..8u32 {
            one(&k.mix, if i < 5 { x } else { y }, i + round, &s);
        }
        show(&format!("buffers {round}"), &s, &[&a, &c]);
    }
    for i in 0..45u32 {
        one(&k.mix, if i % 3 == 0 { &b } else { &c }, i, &s);
    }
    show("long", &s, &[&b, &c]);
    for round in 0..3u32 {
        for i in 0..6u32 {
            one(&k.mix, &a, i ^ round, &s);
        }
        let e = check(s.record_event(), "record");
        for i in 0..6u32 {
            one(&k.mix, &b, i + round, &s);
        }
        check(s.wait(&e), "wait");
        for i in 0..6u32 {
            one(&k.mix, &c, i * round, &s);
        }
        show(&format!("events {round}"), &s, &[&a, &b, &c]);
    }
    let bm = check(
        Launch::new(&k.mix).block1(1).buffer(&a).scalar(0u32).bind(),
        "bind mix",
    );
    let ba = check(
        Launch::new(&k.add).block1(1).buffer(&b).scalar(0u32).bind(),
        "bind add",
    );
    for round in 0..5u32 {
        check(bm.set_scalar(1, round + 7), "set mix");
        check(ba.set_scalar(1, round * 3), "set add");
        if round == 3 {
            check(bm.set_buffer(0, &c), "rebind mix");
        }
        for i in 0..16 {
            check(s.enqueue(if i % 4 == 3 { &ba } else { &bm }), "enqueue");
        }
        show(&format!("bound {round}"), &s, &[&a, &b, &c]);
    }
    for i in 0..5u32 {
        one(&k.mix, &a, i, &s);
        show(&format!("lone {i}"), &s, &[&a]);
    }
    for round in 0..3u32 {
        for i in 0..8u32 {
            one(&k.mix, &a, i, &s);
        }
        // A shape not launched before on this stream: issued after the collected launches.
        let grid = 2 + round;
        check(
            Launch::new(&k.add)
                .grid1(grid)
                .block1(4)
                .buffer(&a)
                .scalar(1u32)
                .enqueue(&s),
            "wide add",
        );
        for i in 0..8u32 {
            one(&k.mix, &a, i, &s);
        }
        show(&format!("new shape {round}"), &s, &[&a]);
    }
}

/// Refused calls in the middle of collected bursts: each error printed, the bursts' results too.
fn errors() {
    let k = kit();
    let a = buf(1);
    let s = check(Stream::create(), "stream");
    for round in 0..3u32 {
        for i in 0..8u32 {
            one(&k.mix, &a, i + round, &s);
        }
        let few = Launch::new(&k.mix).block1(1).buffer(&a).enqueue(&s);
        println!("too few arguments: {few:?}");
        let wide = Launch::new(&k.mix)
            .block1(4096)
            .buffer(&a)
            .scalar(1u32)
            .enqueue(&s);
        println!("block too large: {wide:?}");
        let wrong = Launch::new(&k.mix)
            .block1(1)
            .buffer(&a)
            .scalar(1u64)
            .enqueue(&s);
        println!("wrong size: {wrong:?}");
        let past = Launch::new(&k.mix)
            .block1(1)
            .arg(a.arg_at(2))
            .scalar(1u32)
            .enqueue(&s);
        println!("offset past the end: {past:?}");
        for i in 0..8u32 {
            one(&k.mix, &a, i * round, &s);
        }
        show(&format!("errors {round}"), &s, &[&a]);
    }
}

/// Bursts of `n` launches of a new shape each (the grid changes every burst), `rounds` times.
fn shapes(rounds: u32, n: u32) {
    let k = kit();
    let a = buf(0);
    let s = check(Stream::create(), "stream");
    for round in 0..rounds {
        for _ in 0..n {
            check(
                Launch::new(&k.add)
                    .grid1(1 + round)
                    .block1(1)
                    .buffer(&a)
                    .scalar(1u32)
                    .enqueue(&s),
                "launch",
            );
        }
        check(s.synchronize(), "synchronize");
    }
    show("shapes", &s, &[&a]);
}

/// A burst of 8 and a synchronize: the stream collects from here on.
fn first_burst(k: &Kit, a: &DeviceBuffer<u32>, s: &Stream) {
    for i in 0..8u32 {
        one(&k.mix, a, i, s);
    }
    show("first", s, &[a]);
}

/// A new stream with a burst of 8 behind it (so it collects), then `n` launches of `mix` on
/// it, not synchronized; returns what they use.
fn second_burst(n: u32) -> (Kit, DeviceBuffer<u32>, Stream) {
    let k = kit();
    let a = buf(1);
    let s = check(Stream::create(), "stream");
    first_burst(&k, &a, &s);
    for i in 0..n {
        one(&k.mix, &a, i, &s);
    }
    (k, a, s)
}

/// A burst of 8 (the stream starts collecting), then `n` launches and a synchronize.
fn cap(n: u32) {
    let (_k, a, s) = second_burst(n);
    show("capped", &s, &[&a]);
}

/// A burst of 8, then one of `n` (8 unless given) left collected when the guest exits.
fn exit_pending(n: u32) {
    let _held = second_burst(n);
    // Dropping everything would flush the stream; exiting leaves it to the Store's drop.
    std::process::exit(0);
}

/// Three rounds, each allocating a buffer of `n` u32 (most of the guest's buffer quota), running
/// a burst of bound and argument-list launches on it, then dropping it and its bound launch:
/// each round's allocation must fit once the last round's buffer is dropped, however the bursts
/// were replayed.
fn refill(n: u32) {
    let k = kit();
    let s = check(Stream::create(), "stream");
    for round in 0..3u32 {
        let big = check(DeviceBuffer::<u32>::zeroed(n as usize), &format!("alloc {round}"));
        let bound = check(
            Launch::new(&k.add).block1(1).buffer(&big).scalar(1u32).bind(),
            "bind",
        );
        for i in 0..8u32 {
            check(s.enqueue(&bound), "enqueue");
            one(&k.mix, &big, i, &s);
        }
        show(&format!("refill {round}"), &s, &[&big]);
    }
}

/// [`refill`], then prints "dropped" and waits until the host drops the run: every buffer the
/// guest allocated is gone by then, and the graphs that replayed its bursts are still cached.
fn refill_hold(n: u32) {
    refill(n);
    println!("dropped");
    loop {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(8);
    match args.get(1).map(String::as_str) {
        Some("results") => results(),
        Some("errors") => errors(),
        Some("shapes") => shapes(num(2), num(3)),
        Some("cap") => cap(num(2)),
        Some("exit-pending") => exit_pending(num(2)),
        Some("refill") => refill(num(2)),
        Some("refill-hold") => refill_hold(num(2)),
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2)
        }
    }
}
