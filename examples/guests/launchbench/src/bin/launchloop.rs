//! A guest that only launches, for counting the instructions of one guest launch (issue #12)
//! with callgrind: `launchloop N PATH PATTERN` makes N launches of the empty kernel after a
//! warm-up, and nothing else, so the difference between two runs of different N, divided by
//! the difference of N, is one launch and its share of the synchronizes.
//! PATH: `list` (`stream.launch` with its argument list, built each time as the bench guest
//! does), `prepared` (the same, one `Launch` built once and enqueued each time) or `bound`
//! (`stream.enqueue` of the same launch bound once) or `held` (the same bound launch's own
//! `enqueue`, on the stream `set-stream` gave it: one handle crossing instead of two). PATTERN:
//! `alone` (each
//! launch then `synchronize`: issued to an idle stream) or `burst` (bursts of 32 then
//! `synchronize`: after the warm-up burst the stream collects them for a graph, so each call
//! is pure host work). `scripts/probes/guest-launch-instructions.sh` runs it.

#[path = "../noop.rs"]
mod noop;

use gpuhost_guest::Launch;
use noop::{Noop, check};

/// Launches per burst (the bench guest's `BURST`).
const BURST: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let (path, pattern) = (
        args.get(2).map(String::as_str),
        args.get(3).map(String::as_str),
    );
    let setup = Noop::new();
    let (noop, buf, stream, bound) = (&setup.kernel, &setup.buf, &setup.stream, &setup.bound);
    let prepared = Launch::new(noop).block1(32).buffer(buf).scalar(256u32);
    let launch: &dyn Fn() = match path {
        Some("list") => &|| {
            let launch = Launch::new(noop).block1(32).buffer(buf).scalar(256u32);
            check(launch.enqueue(stream), "launch")
        },
        Some("prepared") => &|| check(prepared.enqueue(stream), "launch prepared"),
        Some("bound") => &|| check(stream.enqueue(bound), "enqueue bound"),
        Some("held") => {
            bound.set_stream(stream);
            &|| check(bound.enqueue(), "enqueue held")
        }
        _ => {
            eprintln!("usage: launchloop N list|prepared|bound|held alone|burst");
            std::process::exit(2)
        }
    };
    let per_sync = match pattern {
        Some("alone") => 1,
        Some("burst") => BURST,
        _ => {
            eprintln!("usage: launchloop N list|prepared|bound|held alone|burst");
            std::process::exit(2)
        }
    };
    // Warm-up, two rounds of the pattern: the driver accepts the shape, and a burst pattern
    // collects from the second round on (and builds its graph at its end).
    for _ in 0..n.div_ceil(per_sync) + 2 {
        for _ in 0..per_sync {
            launch();
        }
        check(stream.synchronize(), "synchronize");
    }
    println!("launchloop n={n}");
}
