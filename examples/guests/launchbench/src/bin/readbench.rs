//! The stream-read benchmark's guest (`gpuhost bench --guest`, the CLI's guest_vs_native.rs):
//! times `Buffer::read_into` (`buffer.read-stream`) of 64 MiB into a `Vec` kept between reads,
//! as a guest reading repeatedly would, and prints the median. Apart from launchbench because a
//! guest that uses streams runs on the runtime's engine with async support, whose every host call
//! costs more: launchbench's launches stay on the plain one.

use gpuhost_guest::{Buffer, Error};
use std::time::Instant;

/// Bytes of each timed read (launchbench's transfers).
const TRANSFER_BYTES: usize = 64 << 20;
/// Timed reads (after one warm-up).
const TRANSFERS: usize = 5;

fn check<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{what}: {e:?}");
        std::process::exit(1)
    })
}

fn main() {
    let buf = check(Buffer::create(TRANSFER_BYTES as u64), "transfer buffer");
    let data: Vec<u8> = (0..TRANSFER_BYTES).map(|i| (i * 7) as u8).collect();
    check(buf.write(0, &data), "write");
    let mut into = Vec::with_capacity(TRANSFER_BYTES);
    let mut times = Vec::new();
    for i in 0..=TRANSFERS {
        into.clear();
        let t0 = Instant::now();
        check(
            buf.read_into(0, TRANSFER_BYTES as u64, &mut into),
            "read_into",
        );
        let ns = t0.elapsed().as_nanos();
        if into != data {
            eprintln!("the bytes read through the stream differ from those written");
            std::process::exit(1);
        }
        if i > 0 {
            times.push(ns);
        }
    }
    times.sort_unstable();
    println!(
        "readstream stream_read_ns={} bytes={TRANSFER_BYTES}",
        times[times.len() / 2]
    );
}
