//! sandbox_bench: GPU time per launch of every corpus kernel, native against sandboxed
//! (`ptxvm::sandbox`), side by side in one run over the same memory layout, for a few abort-poll
//! intervals. Each figure is the median over rounds of a batch of back-to-back launches timed
//! with events, after a warm-up. Prints a markdown table; `--json PATH` writes the numbers.
//!
//! The control block is device memory, as gpuhost's `ControlBlock` (kernels poll it).
//! The corpus cases are test-sized (about 10 000 elements), so these are short kernels, where a
//! fixed per-launch cost of the sandbox shows most.
//!
//! Run: `cargo run --release -p conformance --example sandbox_bench -- [--json out.json]`
//! (on the GPU machine: the packed binary, with `CONFORMANCE_CORPUS` pointing at corpus/).

use std::error::Error;
use std::fmt::Write as _;

use conformance::cases::CASES;
use conformance::context::Context;
use conformance::corpus::{Flavour, flavours_present};
use conformance::sandboxed::{Mode, Prepared, prepare};
use conformance::stream::{Event, Stream};
use ptxvm::sandbox::Policy;

const WARMUP: usize = 5;
const BATCH: usize = 50;
const ROUNDS: usize = 9;
const POLLS: [u32; 3] = [64, 1024, 16384];

fn main() -> Result<(), Box<dyn Error>> {
    let json_path = std::env::args().skip_while(|a| a != "--json").nth(1);
    let env = conformance::driver::env()?;
    let ctx = Context::primary(env)?;
    let stream = Stream::new(&ctx)?;
    println!(
        "driver: {} ({})",
        env.choice.kind,
        env.choice.path.display()
    );
    let mut table = String::from(
        "| kernel | flavour | native µs | sandboxed µs (poll 64 / 1024 / 16384) | ratio at 1024 |\n|---|---|---:|---:|---:|\n",
    );
    let mut json = Vec::new();
    let mut logs = [0f64; POLLS.len()];
    let mut worst = (0f64, String::new());
    let mut n = 0;
    for kc in CASES {
        let flavours = flavours_present(kc.file);
        let Some(flavour) = [Flavour::Nvcc, Flavour::Clang]
            .into_iter()
            .find(|f| flavours.contains(f))
        else {
            continue;
        };
        let seed = 0x5eed;
        let native = prepare(
            &ctx,
            kc,
            flavour,
            (seed, 0xff),
            Mode::Native,
            &Policy::default(),
        )?;
        let sandboxed = POLLS
            .iter()
            .map(|&poll_interval| {
                let policy = Policy { poll_interval };
                prepare(&ctx, kc, flavour, (seed, 0xff), Mode::Sandboxed, &policy)
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Alternate the variants inside every round, so drift hits all of them alike.
        let mut samples = vec![Vec::new(); 1 + POLLS.len()];
        for round in 0..ROUNDS + 1 {
            for (i, p) in std::iter::once(&native).chain(&sandboxed).enumerate() {
                let us = time_batch(&ctx, &stream, p)?;
                if round > 0 {
                    samples[i].push(us);
                }
            }
        }
        // Repeated launches change in/out buffers, so answers are checked by the conformance
        // tests, not here; but no launch of a correct kernel may have been fenced.
        for p in &sandboxed {
            let tag = p.fenced_tag()?;
            if tag != 0 {
                return Err(format!("{}: the sandbox fenced an access ({tag:#x})", kc.name).into());
            }
        }
        let med: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        let ratios: Vec<f64> = med[1..].iter().map(|s| s / med[0]).collect();
        for (l, r) in logs.iter_mut().zip(&ratios) {
            *l += r.ln();
        }
        n += 1;
        if ratios[1] > worst.0 {
            worst = (ratios[1], kc.name.to_string());
        }
        writeln!(
            table,
            "| {} | {flavour} | {:.2} | {:.2} / {:.2} / {:.2} | {:.3} |",
            kc.name, med[0], med[1], med[2], med[3], ratios[1]
        )?;
        json.push(format!(
            "{{\"kernel\":\"{}\",\"flavour\":\"{flavour}\",\"native_us\":{:.4},\"sandboxed_us\":[{:.4},{:.4},{:.4}]}}",
            kc.name, med[0], med[1], med[2], med[3]
        ));
    }
    let geo: Vec<f64> = logs.iter().map(|l| (l / n as f64).exp()).collect();
    writeln!(
        table,
        "\ngeometric-mean ratio over {n} kernels: poll 64 {:.3}, poll 1024 {:.3}, poll 16384 {:.3}; worst at 1024: {} {:.3}",
        geo[0], geo[1], geo[2], worst.1, worst.0
    )?;
    print!("{table}");
    if let Some(path) = json_path {
        std::fs::write(
            path,
            format!(
                "{{\"driver\":\"{}\",\"polls\":[64,1024,16384],\"batch\":{BATCH},\"rounds\":{ROUNDS},\"geomean\":[{:.4},{:.4},{:.4}],\"kernels\":[{}]}}\n",
                env.choice.kind,
                geo[0],
                geo[1],
                geo[2],
                json.join(",")
            ),
        )?;
    }
    Ok(())
}

/// Microseconds per launch over a batch of back-to-back launches, timed with events (after a
/// warm-up on first use of each prepared case).
fn time_batch(
    ctx: &std::sync::Arc<Context>,
    stream: &Stream,
    p: &Prepared,
) -> Result<f64, Box<dyn Error>> {
    for _ in 0..WARMUP {
        stream.launch(&p.function, p.shape, &p.args)?;
    }
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    start.record(stream)?;
    for _ in 0..BATCH {
        stream.launch(&p.function, p.shape, &p.args)?;
    }
    end.record(stream)?;
    stream.synchronize()?;
    Ok(f64::from(end.elapsed_ms_since(&start)?) * 1000.0 / BATCH as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
