//! sandbox_bench: GPU time per launch of every corpus kernel, native against sandboxed
//! (`ptxvm::sandbox`), side by side in one run over the same memory layout, for a few abort-poll
//! intervals. Each figure is the median over rounds of a batch of back-to-back launches timed
//! with events, after a warm-up. Prints a markdown table; `--json PATH` writes the numbers.
//!
//! The control block is device memory, as gpuhost's `ControlBlock` (kernels poll it).
//! The corpus cases are test-sized (about 10 000 elements), so these are short kernels, where a
//! fixed per-launch cost of the sandbox shows most.
//!
//! Two timings of the same batch: stream launches, and the batch captured once as a CUDA graph
//! and replayed. On the H200 one `cuLaunchKernel` takes about 3.5 µs to issue and these kernels
//! run 3.5–5 µs, so stream launches partly time the CPU's issue rate (the native side moved by
//! up to 0.6 µs between runs); a replay issues the kernels from the GPU, about 0.9 µs apart, so
//! its figure is much closer to the kernels' own time. Graphs are timed at poll 1024 only.
//!
//! Each kernel is also timed rewritten with one part of the rewrite switched off (poll 1024), side
//! by side, to show what it buys: `--without if-convert` (the default; `Policy::if_convert`) or
//! `--without version` (`Policy::version_loops`) or `--without early-check`
//! (`Policy::early_loop_free_check`). The tables call it "without". `--without
//! nothing` times the full rewrite twice (an A/A run): its two columns differ only by where their
//! modules lie and by chance, which shows how far apart two columns may be with no difference
//! in code.
//!
//! Every round times the variants in a rotated order (stream batches and graph replays alike),
//! so no variant always runs in one place, and every variant of a kernel reads and writes the
//! same device memory (`prepare_edited`'s `beside`: one arena and control block for all of them).
//! With an arena each, two byte-identical rewrites of oob_write replayed 1.13 and 1.03 µs even
//! with the rotation (session 11, bench/h200-runs/2026-12-02-s11/4e9e1ae-bench), and in session
//! 16 an ablation that left f16_convert's PTX unchanged replayed 1.26 µs against 1.36: where a
//! variant's memory lay moved the shortest kernels by about 0.1 µs, the sandbox's whole cost on
//! them.
//!
//! `--ablate` adds a second table: graph replays of the sandboxed kernel with one part of the
//! rewrite taken out by editing its PTX (`ABLATIONS`), to see which part costs GPU time. The
//! ablated kernels are not safe; they only run here, on the benchmark's own data.
//!
//! Run: `cargo run --release -p conformance --example sandbox_bench -- [--json out.json] [--ablate]`
//! (`SANDBOX_BENCH_KERNELS=a,b` for only those kernels; `SANDBOX_BENCH_FILE=KERNEL=PATH` for
//! `--ablate`'s "from file" column, a hand-edited rewrite of that kernel's module)
//! (on the GPU machine: the packed binary, with `CONFORMANCE_CORPUS` pointing at corpus/).

use std::error::Error;
use std::fmt::Write as _;

use conformance::cases::CASES;
use conformance::context::Context;
use conformance::corpus::{Flavour, flavours_defining};
use conformance::sandboxed::{Mode, Prepared, prepare, prepare_edited};
use conformance::stream::{Event, Stream};
use cudarc::driver::{result, sys};
use ptxvm::sandbox::Policy;

const WARMUP: usize = 5;
const BATCH: usize = 50;
const ROUNDS: usize = 31;
const POLLS: [u32; 3] = [64, 1024, 16384];
/// Index in POLLS of the interval the goal and the graph timings use.
const GOAL_POLL: usize = 1;

/// The prologue's epoch read as the rewriter prints it (polls print the same line).
const EPOCH_READ: &str = "ld.volatile.global.u32 %__sbx_e, [%__sbx_ctl];";

/// An edit of the rewritten PTX.
type Edit = fn(&str) -> String;

/// `--ablate`'s edits of the rewritten PTX: (column, edit). Session 9 read its table as "the
/// loops' polls, not the entry's epoch read, cost"; from session 10 to 16 the table's columns
/// were one off (see `main`), and read aright (session 16, bench/RESULTS.md) the entry's read
/// and the in-kernel arena check were most of a short kernel's cost while loop versioning had
/// made the polls nearly free. Both are now gone from the usual launch (`check_arena_at_entry`
/// off; `LAUNCH_SKIPS_ENTRY_READ`), so "no entry epoch load" only shows what a large launch of
/// a loop-free kernel, or a looping kernel, still pays. Session 16's other poll shapes
/// (branch-free, warp-uniform, a hot back-edge) moved nothing and were dropped; session 18 asks
/// what the global fences and the epoch checks before stores cost, the parts no earlier edit
/// took out.
/// Session 37 adds the shared fences: the nvcc build of mma_gemm_f16_smem replayed 1.22× its
/// native time on the H100, with checks before every `ldmatrix`, `st.shared` and `cp.async` of
/// its loop whose addresses do not change in the loop. Session 44 adds the count of each
/// launch's start (`ptxvm::sandbox::CTL_STARTED`), which the watchdog needs to tell a launch
/// that runs from one still queued.
const ABLATIONS: [(&str, Edit); 15] = [
    ("no start count", without_start_count),
    ("start count predicated", predicated_start_count),
    ("start count, no time word", |p| {
        without_lines(p, &[START_TIME_READ, START_TIME_STORE])
    }),
    ("start count, no counter", |p| {
        without_lines(p, &[START_COUNTER_ADD])
    }),
    ("start count, weak time store", |p| {
        p.replace(START_TIME_STORE, "\tst.global.u64 [%__sbx_b+")
    }),
    ("entry read predicated", predicated_entry_read),
    ("no entry epoch load", without_entry_epoch_read),
    ("no loop polls", |p| edit_polls(p, |_| Vec::new())),
    ("polls, no report", |p| edit_polls(p, poll_without_report)),
    ("no store epoch checks", without_store_epoch_checks),
    ("no global fences", without_global_fences),
    ("neither", |p| {
        without_global_fences(&without_store_epoch_checks(p))
    }),
    ("no shared fences", without_shared_fences),
    ("no fences", |p| {
        without_shared_fences(&without_global_fences(&without_store_epoch_checks(p)))
    }),
    ("from file", from_file),
];

/// `SANDBOX_BENCH_FILE=KERNEL=PATH`: the rewritten module of the case whose module defines
/// `KERNEL` replaced by the text at PATH, a hand-edited rewrite to time before writing the pass
/// that would make it (bench/h200-runs/next/hoist-smem.py); every other module unchanged. Not
/// checked for safety; the benchmark's own data only.
fn from_file(ptx: &str) -> String {
    let chosen = std::env::var("SANDBOX_BENCH_FILE").ok().and_then(|v| {
        let (kernel, path) = v.split_once('=')?;
        ptx.contains(&format!(".entry {kernel}("))
            .then(|| path.to_string())
    });
    match chosen.map(std::fs::read_to_string) {
        Some(Ok(text)) => text,
        Some(Err(e)) => {
            eprintln!("SANDBOX_BENCH_FILE: {e}; timing the rewrite unedited");
            ptx.to_owned()
        }
        None => ptx.to_owned(),
    }
}

/// The start count's lines, as the rewriter prints them (`ptxvm::sandbox` poll.rs): the clock
/// read and the store of the time word (host memory), and the add to the counter (device
/// memory). Each is matched as a line's beginning.
const START_TIME_READ: &str = "\tmov.u64 %__sbx_x, %globaltimer;";
const START_TIME_STORE: &str = "\tst.volatile.global.u64 [%__sbx_b+";
const START_COUNTER_ADD: &str = "\tred.global.add.u32 [%__sbx_a+";

/// The lines that begin with one of `starts` taken out.
fn without_lines(ptx: &str, starts: &[&str]) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx
        .lines()
        .filter(|l| !starts.iter().any(|s| l.starts_with(s)))
    {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every entry's count of its launch's start without its branch: the stores predicated on the
/// test instead, so no divergent block sits at entry (where ptxas keeps the kernel's first
/// loads below it).
fn predicated_start_count(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut inside = false;
    for line in ptx.lines() {
        if line == "\t@%__sbx_q bra $__sbx_counted;" {
            inside = true;
            continue;
        }
        if inside && line == "$__sbx_counted:" {
            inside = false;
            continue;
        }
        if inside && (line.starts_with(START_TIME_STORE) || line.starts_with(START_COUNTER_ADD)) {
            out.push_str("\t@!%__sbx_q ");
            out.push_str(line.trim_start());
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Every entry's count of its launch's start taken out: from the test of `%tid.x | %ctaid.x`
/// to the label past the count.
fn without_start_count(ptx: &str) -> String {
    const FIRST: &str = "\tmov.u32 %__sbx_t, %tid.x;";
    const SECOND: &str = "\tmov.u32 %__sbx_o, %ctaid.x;";
    let mut out = String::with_capacity(ptx.len());
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        if line == FIRST && lines.peek() == Some(&SECOND) {
            for skipped in lines.by_ref() {
                if skipped == "$__sbx_counted:" {
                    break;
                }
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The uniform branch a skipping launch takes over the entry's epoch read replaced by a
/// predicate on the read itself: no control flow at entry (session 18: the branch and the
/// compares before stores cost small launches about 0.02 of the graph-replayed geomean).
fn predicated_entry_read(ptx: &str) -> String {
    replace_pairs(ptx, |first, second| {
        (first.starts_with("@%__sbx_q bra.uni $__sbx_L") && second == EPOCH_READ)
            .then(|| format!("\t@!%__sbx_q {EPOCH_READ}\n"))
    })
}

/// The epoch compare before a store (`setp` of the launch's epoch against the one read, then
/// `@p exit`) taken out; the polls' own compares, which do more than exit, stay.
fn without_store_epoch_checks(ptx: &str) -> String {
    const CHECK: &str = "setp.ne.u32 %__sbx_p, %__sbx_e, %__sbx_epoch;";
    replace_pairs(ptx, |first, second| {
        (first == CHECK && second == "@%__sbx_p exit;").then(String::new)
    })
}

/// The PTX with each pair of consecutive lines (trimmed) for which `edit` gives a text replaced
/// by that text.
fn replace_pairs(ptx: &str, edit: impl Fn(&str, &str) -> Option<String>) -> String {
    let lines: Vec<&str> = ptx.split_inclusive('\n').collect();
    let mut out = String::with_capacity(ptx.len());
    let mut k = 0;
    while k < lines.len() {
        let next = lines.get(k + 1).map(|l| l.trim()).unwrap_or("");
        match edit(lines[k].trim(), next) {
            Some(text) => {
                out.push_str(&text);
                k += 2;
            }
            None => {
                out.push_str(lines[k]);
                k += 1;
            }
        }
    }
    out
}

/// Every global fence's clamp (`selp` of the arena base when out of range) and the fault flag
/// it sets taken out, and a shared fence's align-down after it, so the access uses the
/// kernel's own address (a single access's align-down, which comes before its compare, stays:
/// one instruction off the access's path); a `wmma` tile's stride select after its clamp too
/// (until session 39 it stayed, and kept the whole compare alive: tf32's fast k-loop was 227
/// SASS instructions "without fences", 133 without that select, native 134). Safe here only
/// because every case's accesses are in range: the native column runs them unfenced.
fn without_global_fences(ptx: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut dst_of_clamp: Option<String> = None;
    for line in ptx.split_inclusive('\n') {
        let t = line.trim();
        let clamp = t
            .strip_prefix("selp.b64 ")
            .and_then(|r| r.strip_suffix(", %__sbx_p;"))
            .and_then(|r| r.split_once(", %__sbx_base, "));
        if let Some((dst, src)) = clamp {
            if out
                .last()
                .is_some_and(|l| l.trim() == "@%__sbx_p mov.u32 %__sbx_f, 1;")
            {
                out.pop();
            }
            out.push(format!("\tmov.b64 {dst}, {src};\n"));
            dst_of_clamp = Some(dst.to_string());
            continue;
        }
        if let Some(dst) = dst_of_clamp.take()
            && (t.starts_with(&format!("and.b64 {dst}, {dst}, -"))
                || (t.starts_with("selp.u32 %__sbx_o, ") && t.ends_with(", %__sbx_o, %__sbx_p;")))
        {
            continue;
        }
        out.push(line.to_string());
    }
    out.concat()
}

/// Every shared (and local) window check made independent of the address: its compare of the
/// offset into the window (`setp.lt.u32 %__sbx_q, %__sbx_o, N`, or `%__sbx_gq<n>`) becomes a
/// compare of the launch's tag (31 bits, set in every prologue) with a value it never holds, so
/// the predicate is true (and the user's guard, which if-conversion folds into the same compare,
/// still applies), and the offset's arithmetic is left without a use, for ptxas to drop. Redirects and fault flags stay,
/// now never taken: what remains is the cost of the checks' address chains, the part hoisting
/// them out of a loop would save. Safe only on the benchmark's in-range data, as above.
fn without_shared_fences(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let t = line.trim();
        let check = t
            .strip_prefix("setp.lt.")
            .and_then(|r| r.split_once(' '))
            .filter(|(ty, _)| *ty == "u32" || *ty == "and.u32")
            .and_then(|(ty, r)| {
                let (dst, r) = r.split_once(", %__sbx_o, ")?;
                let window = dst == "%__sbx_q" || dst.starts_with("%__sbx_gq");
                let guard = r.trim_end_matches(';').split_once(", ").map(|(_, g)| g);
                window.then_some((ty, dst, guard))
            });
        match check {
            Some((ty, dst, guard)) => {
                let guard = guard.map(|g| format!(", {g}")).unwrap_or_default();
                out.push_str(&format!(
                    "\tsetp.ne.{ty} {dst}, %__sbx_tag, 4294967295{guard};\n"
                ));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The PTX with each entry's prologue epoch read (its function's first) made a copy of the
/// launch's epoch; the loops' polls still read the control block.
fn without_entry_epoch_read(ptx: &str) -> String {
    ptx.split_inclusive(".entry ")
        .map(|f| f.replacen(EPOCH_READ, "mov.u32 %__sbx_e, %__sbx_epoch;", 1))
        .collect()
}

/// The PTX with every back-edge's poll (from its countdown, `%__sbx_cnt` decremented, to the
/// label its skip branch goes to, which stays) replaced by `edit` of its lines.
fn edit_polls(ptx: &str, edit: fn(&[&str]) -> Vec<String>) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut poll: Vec<&str> = Vec::new();
    let mut in_poll = false;
    for line in ptx.split_inclusive('\n') {
        // A back-edge's countdown starts a poll; a nested loop's charge at its fast copy's
        // entry (`sub.sat.s32`, no poll after it) does not.
        if line.contains("%__sbx_cnt, %__sbx_cnt, ") && !line.contains("sub.sat") {
            in_poll = true;
        }
        if in_poll && line.trim_start().starts_with("$__sbx_L") {
            in_poll = false;
            for l in edit(&poll) {
                out.push_str(&l);
            }
            poll.clear();
        }
        if in_poll {
            poll.push(line);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A poll that only reads the epoch and exits: the stopped-tag and fault reports taken out.
fn poll_without_report(lines: &[&str]) -> Vec<String> {
    let report = |l: &&str| l.contains("[%__sbx_ctl+") || l.contains("%__sbx_q");
    lines
        .iter()
        .filter(|l| !report(l))
        .map(|l| l.to_string())
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let json_path = std::env::args().skip_while(|a| a != "--json").nth(1);
    let ablate = std::env::args().any(|a| a == "--ablate");
    let without = std::env::args()
        .skip_while(|a| a != "--without")
        .nth(1)
        .unwrap_or_else(|| "if-convert".into());
    let off = match without.as_str() {
        "if-convert" => Policy {
            if_convert: false,
            ..Policy::default()
        },
        "version" => Policy {
            version_loops: false,
            ..Policy::default()
        },
        "early-check" => Policy {
            early_loop_free_check: false,
            ..Policy::default()
        },
        "nothing" => Policy::default(),
        other => {
            return Err(format!(
                "--without {other}: say if-convert, version, early-check or nothing"
            )
            .into());
        }
    };
    println!("without: {without}");
    // The timed replays: native, sandboxed, "without", then each edit (the columns before
    // session 16 were one off: "without" sat under the first edit's name, and the last edit's
    // figures were never printed).
    let mut ablation_table = format!(
        "\n| kernel | graph µs: native | sandboxed | without {without} |{}\n|---|---:|---:|---:|{}\n",
        ABLATIONS.map(|(name, _)| format!(" {name} |")).concat(),
        "---:|".repeat(ABLATIONS.len())
    );
    let env = conformance::driver::env()?;
    let ctx = Context::primary(env)?;
    let stream = Stream::new(&ctx)?;
    println!(
        "driver: {} ({})",
        env.choice.kind,
        env.choice.path.display()
    );
    let mut table = String::from(
        "| kernel | flavour | native µs | sandboxed µs (poll 64 / 1024 / 16384) | without µs | ratio at 1024 | without: ratio | graph: native / sandboxed / without µs | graph ratio | without: graph ratio |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut json = Vec::new();
    // Per poll interval, then "without" at 1024.
    let mut logs = [0f64; POLLS.len() + 1];
    let mut worst = [(0f64, String::new()), (0f64, String::new())];
    // The full rewrite, then "without".
    let mut graph_log = [0f64; 2];
    // Per ablation-table column (sandboxed, "without", each edit): the sum of ln(time / native)
    // over the kernels, for the table's geometric-mean row.
    let mut ablation_log = vec![0f64; 2 + ABLATIONS.len()];
    let mut graph_worst = [(0f64, String::new()), (0f64, String::new())];
    let mut n = 0;
    // SANDBOX_BENCH_KERNELS=a,b times only those kernels (a device call's quick look at a few).
    let only = std::env::var("SANDBOX_BENCH_KERNELS").ok();
    let chosen = |name: &str| {
        only.as_ref()
            .is_none_or(|l| l.split(',').any(|k| k == name))
    };
    for kc in CASES.iter().filter(|kc| chosen(kc.name)) {
        let flavours = flavours_defining(kc.file, kc.kernel);
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
        // A sandboxed variant in the native case's arena (see the module header).
        let beside = |policy: &Policy, edit: Edit| {
            let seeds = (seed, 0xff);
            let at = Some(&native);
            prepare_edited(&ctx, kc, flavour, seeds, Mode::Sandboxed, policy, edit, at)
        };
        let without_policy = Policy {
            poll_interval: POLLS[GOAL_POLL],
            ..off.clone()
        };
        let sandboxed = POLLS
            .iter()
            .map(|&poll_interval| Policy {
                poll_interval,
                ..Policy::default()
            })
            .chain([without_policy])
            .map(|policy| beside(&policy, |p| p.to_owned()))
            .collect::<Result<Vec<_>, _>>()?;
        let replays = [
            Replay::capture(&ctx, &stream, &native)?,
            Replay::capture(&ctx, &stream, &sandboxed[GOAL_POLL])?,
            Replay::capture(&ctx, &stream, &sandboxed[POLLS.len()])?,
        ];
        // Alternate the variants inside every round, so drift hits all of them alike, starting
        // each round one variant further on, so every variant takes every place in the order.
        let variants: Vec<&Prepared> = std::iter::once(&native).chain(&sandboxed).collect();
        let mut samples = vec![Vec::new(); variants.len()];
        let mut graph_samples = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..ROUNDS + 1 {
            for k in 0..variants.len() {
                let i = (round + k) % variants.len();
                let us = time_batch(&ctx, &stream, variants[i])?;
                if round > 0 {
                    samples[i].push(us);
                }
            }
            for k in 0..replays.len() {
                let i = (round + k) % replays.len();
                let us = replays[i].time(&stream)?;
                if round > 0 {
                    graph_samples[i].push(us);
                }
            }
        }
        if ablate {
            // SANDBOX_BENCH_DUMP=DIR also writes each ablated module, for ptxas and cuobjdump.
            if let Ok(dir) = std::env::var("SANDBOX_BENCH_DUMP") {
                let ptx = conformance::corpus::read_ptx(kc.file, flavour)?;
                let policy = Policy {
                    poll_interval: POLLS[GOAL_POLL],
                    ..Policy::default()
                };
                let sbx = ptxvm::sandbox::sandbox(&ptx, &policy)?;
                for (i, (_, edit)) in ABLATIONS.iter().enumerate() {
                    std::fs::write(format!("{dir}/{}.{i}.ptx", kc.name), edit(&sbx.ptx))?;
                }
            }
            let mut all = replays.into_iter().collect::<Vec<_>>();
            // Each replay's kernels use its prepared case's module and arena: keep them alive
            // until the replays are gone.
            let mut ablated = Vec::with_capacity(ABLATIONS.len());
            // One flag per timed replay: native, sandboxed and "without" (never edited), then
            // each edit.
            let mut failed = vec![false, false, false];
            for (name, edit) in ABLATIONS {
                let policy = Policy {
                    poll_interval: POLLS[GOAL_POLL],
                    ..Policy::default()
                };
                let edited = beside(&policy, edit);
                // An edit the JIT refuses shows as "err" (timed unedited, to keep the columns).
                failed.push(edited.is_err());
                let p = match edited {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("{}: ablation {name:?}: {e}", kc.name);
                        beside(&policy, |p| p.to_owned())?
                    }
                };
                all.push(Replay::capture(&ctx, &stream, &p)?);
                ablated.push(p);
            }
            let mut samples = vec![Vec::new(); all.len()];
            for round in 0..ROUNDS {
                for k in 0..all.len() {
                    let i = (round + k) % all.len();
                    samples[i].push(all[i].time(&stream)?);
                }
            }
            let cells: String = samples
                .iter_mut()
                .zip(&failed)
                .map(|(s, &bad)| {
                    if bad {
                        " err |".to_string()
                    } else {
                        format!(" {:.2} |", median(s))
                    }
                })
                .collect();
            writeln!(ablation_table, "| {} |{cells}", kc.name)?;
            let native = median(&mut samples[0]);
            for (l, s) in ablation_log.iter_mut().zip(&mut samples[1..]) {
                *l += (median(s) / native).ln();
            }
            drop(all);
            drop(ablated);
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
        let graph_med: Vec<f64> = graph_samples.iter_mut().map(|s| median(s)).collect();
        let graph_ratios = [graph_med[1] / graph_med[0], graph_med[2] / graph_med[0]];
        for k in 0..2 {
            graph_log[k] += graph_ratios[k].ln();
            if graph_ratios[k] > graph_worst[k].0 {
                graph_worst[k] = (graph_ratios[k], kc.name.to_string());
            }
        }
        for (l, r) in logs.iter_mut().zip(&ratios) {
            *l += r.ln();
        }
        n += 1;
        for (w, r) in worst
            .iter_mut()
            .zip([ratios[GOAL_POLL], ratios[POLLS.len()]])
        {
            if r > w.0 {
                *w = (r, kc.name.to_string());
            }
        }
        writeln!(
            table,
            "| {} | {flavour} | {:.2} | {:.2} / {:.2} / {:.2} | {:.2} | {:.3} | {:.3} | {:.2} / {:.2} / {:.2} | {:.3} | {:.3} |",
            kc.name,
            med[0],
            med[1],
            med[2],
            med[3],
            med[4],
            ratios[GOAL_POLL],
            ratios[POLLS.len()],
            graph_med[0],
            graph_med[1],
            graph_med[2],
            graph_ratios[0],
            graph_ratios[1]
        )?;
        json.push(format!(
            "{{\"kernel\":\"{}\",\"flavour\":\"{flavour}\",\"native_us\":{:.4},\"sandboxed_us\":[{:.4},{:.4},{:.4}],\"without_us\":{:.4},\"graph_native_us\":{:.4},\"graph_sandboxed_us\":{:.4},\"graph_without_us\":{:.4}}}",
            kc.name, med[0], med[1], med[2], med[3], med[4], graph_med[0], graph_med[1], graph_med[2]
        ));
    }
    let geo: Vec<f64> = logs.iter().map(|l| (l / n as f64).exp()).collect();
    let graph_geo = graph_log.map(|l| (l / n as f64).exp());
    writeln!(
        table,
        "\ngeometric-mean ratio over {n} kernels: poll 64 {:.3}, poll 1024 {:.3}, poll 16384 {:.3}; worst at 1024: {} {:.3}\nwithout {without}, poll 1024: geometric mean {:.3}; worst {} {:.3}\ngraph-replayed, poll 1024: geometric mean {:.3}; worst {} {:.3}\ngraph-replayed, without {without}: geometric mean {:.3}; worst {} {:.3}",
        geo[0],
        geo[1],
        geo[2],
        worst[0].1,
        worst[0].0,
        geo[3],
        worst[1].1,
        worst[1].0,
        graph_geo[0],
        graph_worst[0].1,
        graph_worst[0].0,
        graph_geo[1],
        graph_worst[1].1,
        graph_worst[1].0
    )?;
    print!("{table}");
    if ablate {
        let cells: String = ablation_log
            .iter()
            .map(|l| format!(" {:.3} |", (l / n as f64).exp()))
            .collect();
        writeln!(ablation_table, "| geometric mean / native | 1 |{cells}")?;
        print!("{ablation_table}");
    }
    if let Some(path) = json_path {
        std::fs::write(
            path,
            format!(
                "{{\"driver\":\"{}\",\"polls\":[64,1024,16384],\"batch\":{BATCH},\"rounds\":{ROUNDS},\"geomean\":[{:.4},{:.4},{:.4}],\"graph_geomean\":{:.4},\"without\":\"{without}\",\"without_geomean\":{:.4},\"graph_without_geomean\":{:.4},\"kernels\":[{}]}}\n",
                env.choice.kind,
                geo[0],
                geo[1],
                geo[2],
                graph_geo[0],
                geo[3],
                graph_geo[1],
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
    per_kernel_us(ctx, stream, || {
        for _ in 0..BATCH {
            stream.launch(&p.function, p.shape, &p.args)?;
        }
        Ok(())
    })
}

/// Microseconds per kernel of the BATCH kernels `enqueue` puts on `stream`, timed with events
/// around them.
fn per_kernel_us(
    ctx: &std::sync::Arc<Context>,
    stream: &Stream,
    enqueue: impl FnOnce() -> Result<(), Box<dyn Error>>,
) -> Result<f64, Box<dyn Error>> {
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    start.record(stream)?;
    enqueue()?;
    end.record(stream)?;
    stream.synchronize()?;
    Ok(f64::from(end.elapsed_ms_since(&start)?) * 1000.0 / BATCH as f64)
}

/// A batch of BATCH launches of one prepared case, captured once as a CUDA graph and replayed:
/// the GPU issues the kernels back to back itself, so the time per kernel is not the CPU's
/// launch rate.
struct Replay {
    ctx: std::sync::Arc<Context>,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Replay {
    fn capture(
        ctx: &std::sync::Arc<Context>,
        stream: &Stream,
        p: &Prepared,
    ) -> Result<Replay, Box<dyn Error>> {
        ctx.bind()?;
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the stream is live, of the bound context, and not capturing.
        unsafe { result::stream::begin_capture(stream.raw(), mode) }?;
        let launched = (0..BATCH).try_for_each(|_| stream.launch(&p.function, p.shape, &p.args));
        // SAFETY: the same stream, capturing since the call above: ending it is always due.
        let graph = unsafe { result::stream::end_capture(stream.raw()) }?;
        let mut replay = Replay {
            ctx: ctx.clone(),
            graph,
            exec: std::ptr::null_mut(),
        };
        launched?;
        // SAFETY: `graph` was just captured and is owned by `replay`.
        replay.exec =
            unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) }?;
        replay.time(stream)?; // warm-up: uploads the graph
        Ok(replay)
    }

    /// Microseconds per kernel over one replay, timed with events.
    fn time(&self, stream: &Stream) -> Result<f64, Box<dyn Error>> {
        per_kernel_us(&self.ctx, stream, || {
            self.ctx.bind()?;
            // SAFETY: `exec` is a live executable graph of the bound context; the stream is live.
            unsafe { result::graph::launch(self.exec, stream.raw()) }?;
            Ok(())
        })
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        if self.ctx.bind().is_err() {
            return;
        }
        if !self.exec.is_null() {
            // SAFETY: this replay's own executable graph, live, with no launch in flight (every
            // `time` synchronized its stream).
            if let Err(e) = unsafe { result::graph::exec_destroy(self.exec) } {
                eprintln!("sandbox_bench: cuGraphExecDestroy in drop failed: {e:?}");
            }
        }
        // SAFETY: this replay's own graph, live; its executable graph is gone.
        if let Err(e) = unsafe { result::graph::destroy(self.graph) } {
            eprintln!("sandbox_bench: cuGraphDestroy in drop failed: {e:?}");
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
