//! The launch benchmark's guest (`gpuhost bench --guest`, the CLI's guest_vs_native.rs):
//! `launchbench N` times N launches of the empty kernel from inside a guest and prints one line
//! of medians, then times `buffer.write` and `buffer.read` of [`TRANSFER_BYTES`] and prints a
//! second line. `launchbench N bursts` instead times bursts of launches followed by a
//! synchronize (`gpuhost bench --bursts`, the CLI's bench/bursts.rs) and prints one line.

mod noop;

use gpuhost_guest::{DeviceBuffer, Launch, Stream};
use noop::{Noop, check};
use std::time::Instant;

/// Launches per burst in `bench`: enqueued back to back, timed as one, then synchronized.
const BURST: usize = 32;
/// Bytes of each timed transfer (the 64 MiB; the default transfer limit).
const TRANSFER_BYTES: usize = 64 << 20;
/// Timed transfers each way (after one warm-up each).
const TRANSFERS: usize = 5;

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Medians in nanoseconds of `launch`: alone onto an idle stream, the same plus `synchronize`
/// (the round trip), and one launch within a burst of `BURST` (one clock pair per burst, so the
/// clock's own cost is amortised as on the native side).
fn time_launches(n: usize, stream: &Stream, launch: &dyn Fn()) -> [u128; 3] {
    let (mut single, mut round, mut burst) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t0 = Instant::now();
        launch();
        single.push(t0.elapsed().as_nanos());
        check(stream.synchronize(), "synchronize");
        round.push(t0.elapsed().as_nanos());
    }
    for _ in 0..n.div_ceil(BURST) {
        let t0 = Instant::now();
        for _ in 0..BURST {
            launch();
        }
        burst.push(t0.elapsed().as_nanos() / BURST as u128);
        check(stream.synchronize(), "synchronize");
    }
    [median(single), median(round), median(burst)]
}

/// Times, in nanoseconds, `n` samples each: a launch with its argument list (`launch_*`), the
/// same launch bound (`bound_*`: `stream.enqueue`) and the bound launch by its own `enqueue` on
/// the stream set for it (`held_*`), each alone, as a round trip and in bursts; a WASI clock read
/// pair (`clock_ns`: the clock is a host call, not a vDSO read, and each lone launch's time
/// includes one); the bare import round trip (`import_ns`: `buffer.len`, per 64 calls); building
/// the argument-list launch without enqueuing it (`build_ns`, per 64).
fn bench(n: usize) {
    let setup = Noop::new();
    let (noop, buf, stream, bound) = (&setup.kernel, &setup.buf, &setup.stream, &setup.bound);
    let [launch_ns, round_ns, burst_ns] = time_launches(n, stream, &|| {
        let launch = Launch::new(noop).block1(32).buffer(buf).scalar(256u32);
        check(launch.enqueue(stream), "launch")
    });
    let [bound_ns, bound_round_ns, bound_burst_ns] =
        time_launches(n, stream, &|| check(stream.enqueue(bound), "enqueue bound"));
    // The same bound launch by its own `enqueue`, on the stream set for it (one handle crosses).
    bound.set_stream(stream);
    let [held_ns, held_round_ns, held_burst_ns] =
        time_launches(n, stream, &|| check(bound.enqueue(), "enqueue held"));
    let clock = (0..n)
        .map(|_| Instant::now().elapsed().as_nanos())
        .collect();
    // Building the argument-list launch alone, in the guest (no host call): what the SDK's
    // `Launch` costs before the call lowers its list.
    let mut build = Vec::new();
    for _ in 0..n.div_ceil(64) {
        let t0 = Instant::now();
        for _ in 0..64 {
            std::hint::black_box(Launch::new(noop).block1(32).buffer(buf).scalar(256u32));
        }
        build.push(t0.elapsed().as_nanos() / 64);
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
        "bench launch_ns={launch_ns} roundtrip_ns={round_ns} burst_ns={burst_ns} \
         bound_launch_ns={bound_ns} bound_roundtrip_ns={bound_round_ns} \
         bound_burst_ns={bound_burst_ns} held_launch_ns={held_ns} \
         held_roundtrip_ns={held_round_ns} held_burst_ns={held_burst_ns} clock_ns={} \
         import_ns={} build_ns={} samples={n}",
        median(clock),
        median(import),
        median(build)
    );
}

/// `launchbench N bursts`: medians, in nanoseconds per launch, of `BURST` launches then
/// `synchronize` (until the device has run them: where graph batching replays the burst, it
/// happens in the synchronize), bound (`bound_ns`) and with argument lists (`launch_ns`), over
/// `N / BURST` bursts each after one warm-up burst.
fn bursts(n: usize) {
    let setup = Noop::new();
    let (noop, buf, stream, bound) = (&setup.kernel, &setup.buf, &setup.stream, &setup.bound);
    let time = |launch: &dyn Fn()| {
        let mut per = Vec::new();
        for i in 0..=n.div_ceil(BURST) {
            let t0 = Instant::now();
            for _ in 0..BURST {
                launch();
            }
            check(stream.synchronize(), "synchronize");
            if i > 0 {
                per.push(t0.elapsed().as_nanos() / BURST as u128);
            }
        }
        median(per)
    };
    let bound_ns = time(&|| check(stream.enqueue(bound), "enqueue bound"));
    let launch_ns = time(&|| {
        let launch = Launch::new(noop).block1(32).buffer(buf).scalar(256u32);
        check(launch.enqueue(stream), "launch")
    });
    println!("bursts bound_ns={bound_ns} launch_ns={launch_ns} burst={BURST} samples={n}");
}

/// Medians in nanoseconds of a `TRANSFER_BYTES` write (guest memory to the device) and read,
/// each the bare import (`buffer.write`, `buffer.read`): `DeviceBuffer::download` would add the
/// SDK's own copy of the bytes into a `Vec<T>`.
fn transfers() {
    let buf = check(
        DeviceBuffer::<u8>::zeroed(TRANSFER_BYTES),
        "transfer buffer",
    );
    let raw = buf.raw();
    let data: Vec<u8> = (0..TRANSFER_BYTES).map(|i| (i * 7) as u8).collect();
    let (mut write, mut read, mut first) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..=TRANSFERS {
        let t0 = Instant::now();
        check(raw.write(0, &data), "write");
        let w = t0.elapsed().as_nanos();
        let t0 = Instant::now();
        let back = check(raw.read(0, TRANSFER_BYTES as u64), "read");
        let r = t0.elapsed().as_nanos();
        if back != data {
            eprintln!("read back differs from what was written");
            std::process::exit(1);
        }
        if i < 2 {
            first.push(w); // the host stages the first and may lock this memory at the second
        }
        if i > 0 {
            write.push(w);
            read.push(r);
        }
    }
    println!(
        "transfer write_ns={} read_ns={} bytes={TRANSFER_BYTES} write_first_ns={} write_second_ns={}",
        median(write),
        median(read),
        first[0],
        first[1]
    );
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    if std::env::args().nth(2).as_deref() == Some("bursts") {
        bursts(n);
        return;
    }
    bench(n);
    transfers();
}
