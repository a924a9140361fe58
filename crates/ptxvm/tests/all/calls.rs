//! Red team: calls and sleeps must not carry a sandboxed kernel past a stop. A loop polls every
//! `poll_interval` back-edges, but the count starts afresh in each call, so loops of fewer
//! iterations nested through calls never polled, and a loop-free tree of calls repeats work
//! exponentially in its depth without a back-edge at all. Each attack below runs for hours
//! unstopped; both must end soon after the epoch changes. Functions that poll nowhere are
//! bounded instead (`ptxvm::sandbox::LEAN_SPAN`): the ones past it poll at every call. And a
//! `nanosleep` (up to a millisecond on NVIDIA) polls after it, since a straight run of them
//! needs no back-edge either.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ptxvm::Module;

use super::fastpath::EPOCH;
use super::redteam::ptx;
use super::sandbox::{Arg, GuestMem, Hidden, Shape, load_sandboxed, run_sandboxed};

/// A function (`.entry` when `entry`) that loops `n` times around `body` (a device function,
/// or a kernel(out) that first writes 1 to `out`, which tells the test it started).
fn looping(name: &str, entry: bool, n: u32, body: &str) -> String {
    let (head, start) = if entry {
        (
            format!(".visible .entry {name}(.param .u64 out)"),
            "    ld.param.u64 %rd1, [out];\n    st.global.u32 [%rd1], 1;\n",
        )
    } else {
        (format!(".func {name}()"), "")
    };
    format!(
        "{head}
{{
    .reg .b64 %rd<2>;
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
{start}    mov.u32 %r1, 0;
L:
{body}
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, {n};
    @%p1 bra L;
    ret;
}}
"
    )
}

/// Loops of 1,000 and 100 iterations nested four deep through calls: 10^11 iterations a
/// thread, and no loop reaches the 1,024 back-edges that would make it poll.
fn nested() -> String {
    [
        looping("spin3", false, 100, "    add.u32 %r2, %r2, 3;"),
        looping("spin2", false, 1000, "    call.uni spin3, ();"),
        looping("spin1", false, 1000, "    call.uni spin2, ();"),
        looping("nested_loops", true, 1000, "    call.uni spin1, ();"),
    ]
    .concat()
}

/// A loop-free tree of calls, 64 wide and six deep under kernel fan_out(out): 64^6 (about
/// 7 * 10^10) calls a thread.
fn fan_out() -> String {
    let mut text =
        ".func f0()\n{\n    .reg .b32 %r<2>;\n    mov.u32 %r1, 7;\n    add.u32 %r1, %r1, 1;\n    ret;\n}\n"
            .to_string();
    for k in 1..=6 {
        let calls = format!("    call.uni f{}, ();\n", k - 1).repeat(64);
        text += &format!(".func f{k}()\n{{\n{calls}    ret;\n}}\n");
    }
    text + ".visible .entry fan_out(.param .u64 out)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    st.global.u32 [%rd1], 1;
    call.uni f6, ();
    ret;
}
"
}

/// The rewritten text of function `name`, up to its closing brace.
fn function<'a>(text: &'a str, name: &str) -> &'a str {
    let at = text
        .find(&format!(".func {name}("))
        .unwrap_or_else(|| panic!("{name} in\n{text}"));
    let rest = &text[at..];
    &rest[..rest.find("\n}\n").map_or(rest.len(), |e| e + 3)]
}

/// Whether function `name` was left alone: no hidden values passed in, so no poll.
fn lean(text: &str, name: &str) -> bool {
    !function(text, name).contains("__gpuhost_sbx_")
}

/// Runs `kernel(out)` on a thread of its own, changes the epoch once the kernel has started
/// (it writes `out` first), and fails unless the launch ends within `limit` after that. The
/// module and memory are leaked: a kernel that is never stopped keeps its thread busy until
/// the test binary exits, and the test fails rather than hangs.
fn stops_after_the_epoch_changes(m: Module, kernel: &'static str, limit: Duration) {
    let m: &'static Module = Box::leak(Box::new(m));
    let mut mem = GuestMem::new();
    let out = mem.alloc(16);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let mem: &'static GuestMem = Box::leak(Box::new(mem));
    let (done, ended) = mpsc::channel();
    std::thread::spawn(move || {
        let hidden = Hidden {
            globals: 0,
            epoch: EPOCH,
        };
        let r = run_sandboxed(
            m,
            kernel,
            Shape::linear(2, 64),
            &[Arg::U64(out)],
            &hidden,
            mem,
        );
        let _ = done.send(r.map(|_| ()).map_err(|f| f.to_string()));
    });
    let started = Instant::now();
    while mem.arena_word(out).load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{kernel} never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    mem.ctl_word(0).store(EPOCH + 1, Ordering::SeqCst);
    match ended.recv_timeout(limit) {
        Ok(r) => r.unwrap_or_else(|f| panic!("{kernel}: {f}")),
        Err(_) => panic!("{kernel} still ran {limit:?} after its guest was stopped"),
    }
    mem.assert_victim_safe();
}

#[test]
fn loops_too_short_to_poll_nested_through_calls_stop_when_the_epoch_changes() {
    let (s, m) = load_sandboxed(&ptx(&nested()));
    // The innermost loop is counted and its function lean; the functions calling it poll at
    // every call, since their loops (calls inside) never count down to a poll.
    assert!(lean(&s.ptx, "spin3"), "{}", s.ptx);
    for f in ["spin2", "spin1"] {
        assert!(
            function(&s.ptx, f).contains("ld.volatile.global.u32 %__sbx_e"),
            "{f} polls at entry:\n{}",
            function(&s.ptx, f)
        );
    }
    stops_after_the_epoch_changes(m, "nested_loops", Duration::from_secs(60));
}

#[test]
fn a_loop_free_tree_of_calls_past_the_lean_span_polls_and_stops_when_the_epoch_changes() {
    let (s, m) = load_sandboxed(&ptx(&fan_out()));
    // f2 runs 16,513 instructions a call, under LEAN_SPAN; f3 runs 64 times that, over it.
    for f in ["f0", "f1", "f2"] {
        assert!(lean(&s.ptx, f), "{f} is left alone:\n{}", s.ptx);
    }
    for f in ["f3", "f4", "f5", "f6"] {
        assert!(!lean(&s.ptx, f), "{f} polls:\n{}", function(&s.ptx, f));
    }
    stops_after_the_epoch_changes(m, "fan_out", Duration::from_secs(60));
}

/// A kernel(out) that sleeps three times, the middle sleep in a device function, then stores.
const SLEEPS: &str = "
.func doze()
{
    nanosleep.u32 1000000;
    ret;
}

.visible .entry sleeps(.param .u64 out)
{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    nanosleep.u32 1000000;
    call.uni doze, ();
    nanosleep.u32 1000000;
    st.global.u32 [%rd1], 5;
    ret;
}
";

#[test]
fn every_nanosleep_polls_and_a_kernel_that_sleeps_never_skips_its_entry_read() {
    // Up to a millisecond each on NVIDIA: a straight run of them, without a back-edge, would
    // otherwise hold the GPU for minutes past a stop.
    let (s, m) = load_sandboxed(&ptx(SLEEPS));
    assert!(!s.kernels[0].loop_free, "a sleeping kernel is not short");
    assert!(!lean(&s.ptx, "doze"), "{}", function(&s.ptx, "doze"));
    let polls = |text: &str| {
        text.matches("sub.s32 %__sbx_cnt, %__sbx_cnt, 1024;")
            .count()
    };
    assert_eq!(polls(function(&s.ptx, "doze")), 1, "{}", s.ptx);
    let kernel = &s.ptx[s.ptx.find(".entry sleeps(").unwrap()..];
    assert_eq!(polls(kernel), 2, "{kernel}");
    // The polls change nothing while the epoch stands.
    assert_eq!(run_once(&m, "sleeps"), [5, 0, 0, 0]);
}

/// Runs `kernel(out)` once, one warp, while the epoch stands; out's first word afterwards.
fn run_once(m: &Module, kernel: &str) -> Vec<u8> {
    let mut mem = GuestMem::new();
    let out = mem.alloc(4);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    let shape = Shape::linear(1, 32);
    run_sandboxed(m, kernel, shape, &[Arg::U64(out)], &hidden, &mem).unwrap();
    mem.read(out, 4)
}

/// A counted loop of 100 calls of a lean leaf, called once by kernel counted_calls(out).
fn counted_calls() -> String {
    let leaf = ".func leaf()\n{\n    .reg .b32 %r<2>;\n    add.u32 %r1, %r1, 1;\n    ret;\n}\n";
    let steps = looping("steps", false, 100, "    call.uni leaf, ();");
    format!(
        "{leaf}{steps}.visible .entry counted_calls(.param .u64 out)
{{
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    call.uni steps, ();
    st.global.u32 [%rd1], 9;
    ret;
}}
"
    )
}

#[test]
fn a_counted_loop_of_lean_calls_within_the_lean_span_is_lean_and_its_caller_counts_its_span() {
    // Before session 18 the count a non-lean function keeps for its lean calls made `steps`
    // non-lean, with a countdown and branch at each call in its loop (nvcc's device_call,
    // `collatz_steps`, replayed 1.89x native on the H200). Lean, it runs as written, and the
    // kernel counts one call of it as its whole span.
    let (s, m) = load_sandboxed(&ptx(&counted_calls()));
    assert!(lean(&s.ptx, "leaf") && lean(&s.ptx, "steps"), "{}", s.ptx);
    let kernel = &s.ptx[s.ptx.find(".entry counted_calls(").unwrap()..];
    let weight: i64 = kernel
        .split("sub.s32 %__sbx_cnt, %__sbx_cnt, ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("the kernel counts the call down:\n{kernel}"));
    assert!(
        weight >= 100,
        "counts at least the loop's 100 calls: {weight}"
    );
    assert_eq!(run_once(&m, "counted_calls"), [9, 0, 0, 0]);
}
