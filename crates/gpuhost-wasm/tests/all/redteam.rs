//! The red-team suite of issue #9: a hostile guest (tests/guests/redteam) attacks while a victim
//! guest holds a secret in device memory and 8 bystander guests do correct work. In every case
//! the victim's bytes stay unchanged and unseen, the attacker gets its typed error, every
//! bystander finishes with a correct result, and the device is never poisoned.
//!
//! The attacker is handed the victim's device address (the strongest form of each attack; it
//! also aims at addresses guessed from its own buffers). Attacks that would fault an unconfined
//! device run in a child process, so a sandbox bug fails that test alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuhost_wasm::{Error, Limits, Output, OutputPipe, RunOutcome, Runtime};

use crate::{assert_ok, device, device_alone, guest, opts, run, stdout};

/// The victim's secret word (it holds 64 KiB of it).
const SECRET: u32 = 0x5ec2_e7a5;
const VICTIM_WORDS: u64 = 16 << 10;
/// Bystanders per attack.
const BYSTANDERS: usize = 8;
/// How long an attacker's run may take before its test fails: past the worst legitimate case
/// (the flood's bounded waits, 120 s in the guest after a gate that may be held 80 s).
const ATTACKER_LIMIT: Duration = Duration::from_secs(240);

/// A running victim guest: its output pipe and its run.
struct Victim {
    pipe: OutputPipe,
    task: tokio::task::JoinHandle<Result<RunOutcome, Error>>,
    addr: u64,
}

fn text(pipe: &OutputPipe) -> String {
    String::from_utf8_lossy(&pipe.contents()).into_owned()
}

/// Victim checks done so far (`checked N` lines).
fn checks(pipe: &OutputPipe) -> usize {
    text(pipe)
        .lines()
        .filter(|l| l.starts_with("checked"))
        .count()
}

impl Victim {
    /// Starts the victim and waits until its secret is in place.
    async fn start(rt: &'static Runtime) -> Self {
        let pipe = OutputPipe::new(1 << 20);
        let secret = format!("{SECRET:x}");
        let words = format!("{VICTIM_WORDS:x}");
        let mut o = opts("redteam", &["victim", &secret, &words]);
        o.stdout = Output::Pipe(pipe.clone());
        let task = tokio::spawn(async move { rt.run(&guest("redteam"), o).await });
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let t = text(&pipe);
            if let Some(addr) = t
                .lines()
                .find_map(|l| l.strip_prefix("victim ready addr=0x"))
                .and_then(|l| l.split_whitespace().next())
            {
                let addr = u64::from_str_radix(addr, 16).expect("victim address");
                return Self { pipe, task, addr };
            }
            assert!(!task.is_finished(), "the victim ended early: {t}");
            assert!(Instant::now() < deadline, "the victim never got ready: {t}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits for two more checks of the secret (the victim exits 1 on any change), then ends it.
    async fn assert_intact(self, attack: &str) {
        let seen = checks(&self.pipe);
        let deadline = Instant::now() + Duration::from_secs(60);
        while checks(&self.pipe) < seen + 2 {
            if self.task.is_finished() {
                let out = self.task.await.expect("victim task");
                panic!(
                    "{attack}: the victim ended: {:?}\n{}",
                    out.map(|o| o.exit_code),
                    text(&self.pipe)
                );
            }
            assert!(
                Instant::now() < deadline,
                "{attack}: the victim stopped checking"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !text(&self.pipe).contains("changed"),
            "{attack}: the victim's secret changed: {}",
            text(&self.pipe)
        );
        self.task.abort();
    }
}

/// Runs the 8 bystanders (saxpy, reduce, matmul) and checks each one's own verdict.
async fn bystanders(rt: &'static Runtime) -> Vec<tokio::task::JoinHandle<()>> {
    (0..BYSTANDERS)
        .map(|i| {
            tokio::spawn(async move {
                let (name, args, want) = match i % 3 {
                    0 => ("saxpy", vec![(3000 + i).to_string()], "saxpy ok"),
                    1 => ("reduce", vec![(5000 + i).to_string()], "reduce ok"),
                    _ => (
                        "matmul",
                        vec!["9".into(), "7".into(), "11".into()],
                        "matmul ok",
                    ),
                };
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = run(rt, name, &args).await;
                let o = o.unwrap_or_else(|e| panic!("bystander {name}: {e}"));
                assert_ok(&o, want);
            })
        })
        .collect()
}

/// The attacker's verdict line: its outcomes (in order of first appearance) and secret words seen.
pub(crate) fn verdict(o: &RunOutcome, attack: &str) -> (Vec<String>, u32) {
    let out = stdout(o);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("result {attack} ")))
        .unwrap_or_else(|| panic!("{attack}: no verdict; stdout {out:?} stderr {err:?}"));
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_else(|| panic!("{attack}: {k} missing in {line:?}"))
    };
    let outcomes = field("outcome=").split('+').map(str::to_string).collect();
    (outcomes, field("seen=").parse().expect("seen count"))
}

/// What an attack must get.
enum Want {
    /// Exactly these outcomes, in this order.
    Exactly(&'static [&'static str]),
    /// Some accesses fenced (the ones outside the guest), the rest in its own memory: ok.
    Fenced,
    /// Confined without a report (shared/local clamps, misaligned accesses aligned down), or
    /// reported as fenced: never a fault or a wrong value.
    Confined,
}

/// One attack with a victim and bystanders around it; returns the attacker's stderr.
async fn attack(rt: &'static Runtime, attack: &str, limits: Limits, want: Want) -> String {
    assert!(limits.sandbox, "the red-team attacks run sandboxed");

    let victim = Victim::start(rt).await;
    let mut others = bystanders(rt).await;
    if attack == "flood" {
        // The flood's gate kernel holds the device until the attacker opens it with a write.
        // On NVIDIA a bystander starting meanwhile waits in the driver for the device (its
        // module load does), holding a runtime thread and the driver's lock, so the attacker's
        // write waited until the watchdog stopped the gate (the H200, session 15: a hang before
        // the watchdog's fix, a time-limit stop after it). The bystanders run first here; the
        // victim runs throughout.
        for b in others.drain(..) {
            b.await
                .unwrap_or_else(|e| panic!("{attack}: a bystander failed: {e}"));
        }
    }
    let mut o = opts(
        "redteam",
        &[
            attack,
            &format!("{:x}", victim.addr),
            &format!("{SECRET:x}"),
        ],
    );
    o.limits = limits;
    let Ok(out) = tokio::time::timeout(ATTACKER_LIMIT, rt.run(&guest("redteam"), o)).await else {
        let finished = others.iter().filter(|b| b.is_finished()).count();
        stuck(format!(
            "{attack}: the attacker's run did not end within {ATTACKER_LIMIT:?}; victim checks \
             so far {}, bystanders finished {finished} of {BYSTANDERS}",
            checks(&victim.pipe)
        ));
    };
    let out = out.unwrap_or_else(|e| panic!("{attack}: the attacker's run failed: {e}"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.exit_code, 0, "{attack}: {} {err}", stdout(&out));
    if attack.ends_with("-burst") {
        // Those attacks are about graph batching: their burst must have been replayed as one.
        assert!(
            out.graph_launches > 0,
            "{attack}: no launch was graph-batched"
        );
    }
    // An attack's timing line, when it prints one, goes to the test's output.
    for line in stdout(&out)
        .lines()
        .filter(|l| l.contains(" stopped after "))
    {
        println!("{attack}: {line}");
    }
    let (outcomes, seen) = verdict(&out, attack);
    assert_eq!(seen, 0, "{attack}: the attacker read the secret; {err}");
    match want {
        Want::Exactly(w) => assert_eq!(outcomes, w, "{attack}: {err}"),
        Want::Fenced => {
            assert!(
                outcomes.iter().any(|c| c == "memory-fenced")
                    && outcomes.iter().all(|c| c == "ok" || c == "memory-fenced"),
                "{attack}: {outcomes:?} {err}"
            );
        }
        Want::Confined => assert!(
            outcomes.iter().all(|c| c == "ok" || c == "memory-fenced"),
            "{attack}: {outcomes:?} {err}"
        ),
    }
    for (i, b) in others.into_iter().enumerate() {
        let Ok(done) = tokio::time::timeout(ATTACKER_LIMIT, b).await else {
            stuck(format!(
                "{attack}: bystander {i} did not end within {ATTACKER_LIMIT:?} of the attack's end"
            ));
        };
        done.unwrap_or_else(|e| panic!("{attack}: a bystander failed: {e}"));
    }
    victim.assert_intact(attack).await;
    let host = rt.host();
    host.synchronize()
        .unwrap_or_else(|e| panic!("{attack}: the device is unusable afterwards: {e}"));
    assert!(
        !matches!(
            host.synchronize(),
            Err(gpuhost::Error::ContextPoisoned { .. })
        ),
        "{attack}: poisoned"
    );
    err
}

/// Fails the test with `msg`, written first straight to the process's stderr rather than the
/// test's captured output: a run stuck in a driver call can keep the test's runtime from shutting
/// down, and so its report from ever being printed (the rare one-thread hang on the H200).
fn stuck(msg: String) -> ! {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes());
    panic!("{msg}");
}

/// Sandboxed limits for the attacks: GPU time short enough for a quick test yet ample for the
/// attacks' own loops on an unoptimised softcuda, and quotas that the flood and local-memory
/// attacks reach quickly.
pub(crate) fn attack_limits() -> Limits {
    Limits {
        sandbox: true,
        max_kernel_time: Duration::from_secs(2),
        max_launches_in_flight: 16,
        max_launch_local_bytes: 16 << 20,
        ..Limits::default()
    }
}

/// Runs `body` on a fresh tokio runtime in a child process (a sandbox bug that faulted the
/// device would otherwise poison every later test of this binary).
pub(crate) fn in_child(name: &str, body: impl AsyncFnOnce(&'static Runtime)) {
    testkit::in_child(name, || {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio");
        tokio.block_on(async {
            let Some((rt, _device)) = device().await else {
                return;
            };
            body(rt).await;
        });
    });
}

/// Every attack on memory, in one child process (compiling the guests is most of its cost).
/// Out-of-range accesses through pointers, offsets, raw u64 addresses, generic pointers (hand
/// written and compiler shaped), atomics, reductions, vector and `.nc` loads are fenced into the
/// attacker's own memory and reported; out-of-range shared and local accesses and misaligned
/// ones are confined without a fault.
#[test]
fn memory_attacks_are_fenced_or_confined_and_never_reach_the_victim_or_fault_the_device() {
    in_child(
        "redteam::memory_attacks_are_fenced_or_confined_and_never_reach_the_victim_or_fault_the_device",
        async |rt| {
            crate::prewarm(&["redteam", "saxpy", "reduce", "matmul"]);
            // `offsets-after`: the same accesses with each launch's end and its results taken
            // by `read-after`, which must report them instead of handing the bytes over.
            for a in [
                "offsets",
                "offsets-after",
                "raw",
                "scan",
                "generic",
                "atomics",
                "vectors",
                "nc",
            ] {
                let err = attack(rt, a, attack_limits(), Want::Fenced).await;
                // The report names a kernel of the attack.
                let kernels = [
                    "peek_poke",
                    "scan",
                    "c_scan",
                    "c_generic",
                    "atomics",
                    "vectors",
                    "nc_loads",
                ];
                assert!(
                    kernels
                        .iter()
                        .any(|k| err.contains(&format!("kernel {k} "))),
                    "{a}: {err}"
                );
            }
            for a in ["shared", "local", "misaligned"] {
                attack(rt, a, attack_limits(), Want::Confined).await;
            }
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_kernel_is_stopped_with_a_time_limit_error_and_its_guest_goes_on() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let limits = attack_limits_ms(300);
    let err = attack(
        rt,
        "endless",
        limits.clone(),
        Want::Exactly(&["time-limit", "ok"]),
    )
    .await;
    assert!(
        err.contains("kernel endless"),
        "the error names the kernel: {err}"
    );
    // The same kernel inside a burst replayed as a graph (burst/) is stopped the same way.
    let err = attack(
        rt,
        "endless-burst",
        limits,
        Want::Exactly(&["ok", "time-limit"]),
    )
    .await;
    assert!(err.contains("endless"), "the error names the kernel: {err}");
    // Its end taken by `read-after`: the stop is returned instead of the bytes.
    let err = attack(
        rt,
        "endless-after",
        attack_limits_ms(300),
        Want::Exactly(&["time-limit", "ok"]),
    )
    .await;
    assert!(
        err.contains("kernel endless"),
        "the error names the kernel: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernels_that_hold_the_gpu_through_calls_or_beside_a_barrier_are_stopped_with_a_time_limit_error()
 {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // Loops too short to poll nested through calls, then a loop-free tree of calls: neither
    // has a back-edge that reaches a poll, and each runs for hours unless calls poll too. Then
    // threads spinning beside threads at barrier 0: the stop must release the waiting ones.
    let err = attack(
        rt,
        "calls",
        attack_limits_ms(300),
        Want::Exactly(&["time-limit", "ok"]),
    )
    .await;
    // The verdict lists each kind of outcome once; the error text holds both stops.
    for k in ["nested_calls", "fan_out_calls", "spin_at_barrier"] {
        assert!(err.contains(&format!("kernel {k}")), "names {k}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warp_sync_member_masks_naming_absent_lanes_end_only_their_own_launch() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // The sandbox does not check `.sync` member masks: a full mask while half the warp has
    // left, or spins, is the guest's broken promise, and must cost it alone (an answer or its
    // time limit), never a wait that outlives the stop.
    let err = attack(
        rt,
        "sync-masks",
        attack_limits_ms(300),
        Want::Exactly(&["ok", "time-limit"]),
    )
    .await;
    for k in ["shfl_beside_spin", "warpsync_beside_spin"] {
        assert!(err.contains(&format!("kernel {k}")), "names {k}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tensor_core_mma_in_a_broken_warp_ends_only_its_own_launch() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // mma.sync.aligned run by half a warp, the other half gone or spinning: the sandbox passes
    // mma through (registers only), so what the GPU does with the broken promise must stay the
    // attacker's: an answer or its time limit, while the victim and bystanders go on.
    let err = attack(
        rt,
        "mma",
        attack_limits_ms(300),
        Want::Exactly(&["ok", "time-limit"]),
    )
    .await;
    assert!(
        err.contains("kernel mma_divergent"),
        "names the spinning kernel: {err}"
    );
}

/// [`attack_limits`] with a GPU-time limit of `ms` per launch.
fn attack_limits_ms(ms: u64) -> Limits {
    Limits {
        max_kernel_time: Duration::from_millis(ms),
        ..attack_limits()
    }
}

/// An attacker whose endless kernel fills every SM until its 2 s limit, and a guest with a
/// 300 ms limit whose kernel waits behind it all that time: the waiting launch is not charged
/// the time it spent off the device (watchdog/mod.rs's header), so it runs once
/// the attacker is stopped and ends correctly. Counted from its stream's front it was stopped
/// at 300 ms, never having run. softcuda holds room for 1,024 resident threads in this child
/// (`SOFTCUDA_RESIDENT_THREADS`), as a GPU's SMs do; the attacker's blocks exceed any GPU's.
#[test]
fn a_guest_queued_behind_another_guests_kernels_that_fill_the_gpu_is_not_charged_their_time() {
    let name = "redteam::a_guest_queued_behind_another_guests_kernels_that_fill_the_gpu_is_not_charged_their_time";
    let configure = |cmd: &mut std::process::Command| {
        cmd.env("SOFTCUDA_RESIDENT_THREADS", "1024");
    };
    testkit::in_child_with(name, configure, || {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio");
        tokio.block_on(queued_guest_is_not_charged());
    });
}

async fn queued_guest_is_not_charged() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    crate::prewarm(&["redteam", "saxpy"]);
    // The waiting guest's module is compiled and loaded first, while the device is idle: on
    // NVIDIA a module load waits for every running kernel, which would keep the guest from
    // reaching the device's queue at all.
    let cache = Arc::new(gpuhost_wasm::ModuleCache::new(16, 64 << 20));
    let saxpy = || {
        let mut o = opts("saxpy", &["3000"]);
        o.limits = attack_limits_ms(300);
        o.modules = Some(cache.clone());
        o
    };
    let warm = rt
        .run(&guest("saxpy"), saxpy())
        .await
        .expect("saxpy, warming");
    assert_ok(&warm, "saxpy ok");

    let pipe = OutputPipe::new(1 << 16);
    let mut o = opts("redteam", &["fill", "0", &format!("{SECRET:x}")]);
    o.limits = attack_limits();
    o.stdout = Output::Pipe(pipe.clone());
    let attacker = tokio::spawn(async move { rt.run(&guest("redteam"), o).await });
    let deadline = Instant::now() + Duration::from_secs(120);
    while !text(&pipe).contains("fill launched") {
        assert!(
            !attacker.is_finished(),
            "the attacker ended early: {}",
            text(&pipe)
        );
        assert!(Instant::now() < deadline, "the attacker never launched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let queued_at = Instant::now();
    let waited = rt
        .run(&guest("saxpy"), saxpy())
        .await
        .expect("saxpy, queued");
    let held = queued_at.elapsed();
    assert_ok(&waited, "saxpy ok");
    let out = attacker
        .await
        .expect("attacker task")
        .expect("attacker run");
    assert_eq!(out.exit_code, 0);
    let verdict = "result fill outcome=ok+time-limit ";
    assert!(
        text(&pipe).contains(verdict),
        "the attacker: {}",
        text(&pipe)
    );
    // Not a timing goal: the queued guest's run must have waited past its own limit for the
    // test to show anything (the attacker's 2 s, on softcuda and on NVIDIA alike).
    assert!(
        held > Duration::from_millis(300),
        "the guest waited only {held:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_legal_loops_and_deep_call_chains_finish_correctly_under_the_sandbox() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // `deep-after`: the results read by `read-after` are those the kernel wrote (the copy is
    // queued behind it).
    for a in ["long", "deep", "deep-after"] {
        // A generous limit: an unoptimised softcuda on a loaded CI machine is slow; the point is
        // that polling on every back-edge neither stops nor corrupts a legal loop.
        let limits = Limits {
            max_kernel_time: Duration::from_secs(60),
            ..Limits::default()
        };
        attack(rt, a, limits, Want::Exactly(&["ok"])).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernels_skip_copy_cannot_be_named_by_the_guest() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // The copy exists in the rewritten module (long_loop may skip its entry read), yet a
    // guest asking for it by name gets kernel-not-found, and its next launch runs.
    let want = Want::Exactly(&["kernel-not-found", "ok"]);
    let err = attack(rt, "skip-copy", attack_limits(), want).await;
    assert!(err.contains("long_loop__gpuhost_skip"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trap_two_barrier_ids_fatbin_oversized_globals_and_local_arrays_are_refused_with_their_errors()
 {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let err = attack(rt, "trap", attack_limits(), Want::Exactly(&["invalid-ptx"])).await;
    assert!(err.contains("trap") && err.contains("line"), "{err}");
    // Threads waiting at two barrier ids: refused at load, the device untouched.
    let want = Want::Exactly(&["invalid-ptx", "ok"]);
    let err = attack(rt, "barriers", attack_limits(), want).await;
    assert!(err.contains("barrier 0 for the whole block"), "{err}");
    let err = attack(
        rt,
        "fatbin",
        attack_limits(),
        Want::Exactly(&["binary-refused"]),
    )
    .await;
    assert!(err.contains("from-ptx"), "{err}");
    let want = Want::Exactly(&["quota-exceeded", "ok"]);
    let err = attack(rt, "globals", attack_limits(), want).await;
    assert!(
        err.contains("module globals") && err.contains("local memory"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_launches_then_dropping_the_stream_keeps_them_counted_until_they_end() {
    // Alone on the device: the flood's gate kernel holds the GPU until the guest's write opens
    // it, and on NVIDIA another test's driver call that waits for the device (a module load)
    // would hold the lock that write needs (the house rule for tests that hold the GPU).
    let Some((rt, _device)) = device_alone().await else {
        return;
    };
    let want = Want::Exactly(&["quota-exceeded", "ok"]);
    // Legal launches, only many: a limit no slow machine reaches, and short enough that a gate
    // that never opened fails the test in seconds rather than hanging it.
    let limits = Limits {
        max_kernel_time: Duration::from_secs(10),
        ..attack_limits()
    };
    let err = attack(rt, "flood", limits, want).await;
    assert!(err.contains("launches in flight"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_guest_dropping_a_flooded_stream_still_has_its_launches_counted() {
    // Alone, as the sandboxed flood: and a trusted guest's gate has no watchdog to end it.
    let Some((rt, _device)) = device_alone().await else {
        return;
    };
    let mut o = opts("redteam", &["flood", "0", "0"]);
    o.limits = Limits {
        sandbox: false,
        max_launches_in_flight: 16,
        ..Limits::default()
    };
    let out = rt.run(&guest("redteam"), o).await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(verdict(&out, "flood").0, ["quota-exceeded", "ok"], "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_store_with_endless_kernels_running_stops_them_before_run_returns() {
    // Alone on the device: the run waits a bounded 5 s for its stopped kernels, and on softcuda
    // stopping an endless grid is CPU work that other tests running beside it would slow.
    let Some((rt, _device)) = device_alone().await else {
        return;
    };
    attack(rt, "drop-store", attack_limits(), Want::Exactly(&["ok"])).await;
    // The same again, looking at the run itself: it returns once its kernels have ended.
    let mut o = opts("redteam", &["drop-store", "0", "0"]);
    // Far past the 5 s the run waits for its dropped kernels, so only the Store's drop can have
    // stopped them in time; and bounded, because while they run another test's cuModuleUnload
    // on NVIDIA may hold the driver's lock waiting for the device, and this guest's next launch
    // behind it would then never reach its drop (a parallel run's overrun on the H200,
    // bench/h200-runs/2026-12-02-s11/bd8982a-stress; 3600 s here before).
    o.limits = Limits {
        max_kernel_time: Duration::from_secs(20),
        ..attack_limits()
    };
    let out = rt.run(&guest("redteam"), o).await.unwrap();
    assert!(
        out.launches_ended,
        "the dropped guest's endless kernels were not stopped"
    );
}
