//! Test support shared by the workspace's integration-test binaries: the one rule for a missing
//! driver, and running one test in a child process, for state that lasts as long as the process
//! does — a kernel fault poisons the device until the process exits (on NVIDIA's driver and on
//! softcuda alike), and the driver is chosen once per process.
//!
//! The rule for a missing driver: a test never skips silently. softcuda is built with every test
//! binary, so "no driver" means the loader or the build is broken, and the test fails — unless
//! [`ALLOW_SKIP_ENV`] is set to `1`, which a person sets on purpose (say, to run the suites on a
//! machine where softcuda cannot load).
#![deny(missing_docs)]

pub mod mbarrier;
pub mod ptxgen;

use std::fmt::Display;
use std::io::Read;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A kernel for tests that need the device busy until they say so: `wait_word(ctl, out)` spins
/// until the `u32` at `ctl` is not 0 (or after 2^31 polls, so a test that fails before setting
/// it does not leave the device spinning for good), then writes how many polls it took (at
/// least 1) at `out`. One thread; PTX 7.0 for sm_80, which NVIDIA's JIT and softcuda both load.
pub const WAIT_WORD_PTX: &str = r#"
.version 7.0
.target sm_80
.address_size 64

.visible .entry wait_word(.param .u64 ctl, .param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [ctl];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, 0;
$L_spin:
    add.u32 %r2, %r2, 1;
    ld.volatile.global.u32 %r1, [%rd1];
    setp.ne.u32 %p1, %r1, 0;
    setp.gt.u32 %p2, %r2, 2147483647;
    or.pred %p1, %p1, %p2;
    @!%p1 bra $L_spin;
    st.global.u32 [%rd2], %r2;
    ret;
}
"#;

/// The entry name of [`WAIT_WORD_PTX`]'s kernel.
pub const WAIT_WORD_ENTRY: &str = "wait_word";

/// Set to `1` to let tests skip when no driver loads. Unset (as in CI and the README's test
/// command), a missing driver fails the test.
pub const ALLOW_SKIP_ENV: &str = "GPUHOST_TEST_ALLOW_SKIP";

/// Whether [`ALLOW_SKIP_ENV`] allows skipping for lack of a driver.
pub fn skip_allowed() -> bool {
    std::env::var(ALLOW_SKIP_ENV).is_ok_and(|v| v.trim() == "1")
}

/// The one rule for a missing driver, for every suite: `Some(value)` when the driver loaded;
/// when it did not (`found` is the error), prints `skipped: no driver (…)` and returns `None`
/// only if [`skip_allowed`], and otherwise fails the test with a message saying what to fix.
pub fn driver_or_skip<T, E: Display>(found: Result<T, E>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(e) if skip_allowed() => {
            println!("skipped: no driver ({e})");
            None
        }
        Err(e) => panic!(
            "no driver loaded: {e}. softcuda is built with the tests, so this is a loader or \
             build fault; fix it, or set {ALLOW_SKIP_ENV}=1 to let driver tests skip on purpose"
        ),
    }
}

/// Names the test a child process started by [`in_child`] runs.
const CHILD_ENV: &str = "GPUHOST_TEST_CHILD";

/// Whether this process is a child started by [`in_child`] or [`in_child_with`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs this test binary again on test `name` alone (its path, e.g. `"launch::x"`) with
/// `configure` applied to the command, and returns how it ended, pass or fail: for tests that
/// prove a suite fails under a given environment.
pub fn run_child(name: &str, configure: impl FnOnce(&mut Command)) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture"]);
    configure(&mut cmd);
    output_within(cmd, name, child_limit(), OUTPUT_GRACE)
}

/// How long a child test may run before it is killed and its test fails: seconds in this
/// variable, else 600 (softcuda's slowest child tests take about a minute on two busy cores).
pub const CHILD_LIMIT_ENV: &str = "GPUHOST_TEST_CHILD_LIMIT_S";

/// How long a child's output is awaited once it has ended.
const OUTPUT_GRACE: Duration = Duration::from_secs(10);

fn child_limit() -> Duration {
    std::env::var(CHILD_LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(Duration::from_secs(600), Duration::from_secs)
}

/// Reads `pipe` to its end on a thread of its own; the bytes arrive on the receiver.
fn drained(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        let _ = tx.send(bytes);
    });
    rx
}

/// Runs `cmd` (the child running test `name`) to its end and collects its output, as
/// `Command::output` does, but never waits for ever: a child past `limit` is killed and the test
/// fails, showing what it printed; and once the child has ended, its output is awaited for at
/// most `grace`, because a pipe that something else still holds open (a process that inherited
/// it) would otherwise keep the read waiting after the child is gone (the H200 once showed a
/// parent waiting in `Command::output` with no child left, bench/RESULTS.md session 10).
fn output_within(mut cmd: Command, name: &str, limit: Duration, grace: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run the test binary as a child");
    let readers = [drained(child.stdout.take()), drained(child.stderr.take())];
    let started = Instant::now();
    let status: ExitStatus = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let status = child.wait().expect("reap the killed child");
                let [out, err] = readers.map(|r| r.recv_timeout(grace));
                panic!(
                    "child running {name} ran past {}s ({CHILD_LIMIT_ENV}) and was killed \
                     ({status}):\n{}\n{}",
                    limit.as_secs(),
                    String::from_utf8_lossy(&out.unwrap_or_default()),
                    String::from_utf8_lossy(&err.unwrap_or_default()),
                );
            }
        }
    };
    let [stdout, stderr] = readers.map(|r| {
        r.recv_timeout(grace).unwrap_or_else(|_| {
            format!(
                "(output of the child running {name} still open {}s after it ended)\n",
                grace.as_secs()
            )
            .into_bytes()
        })
    });
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Runs `body` in a child process: this test binary re-run on test `name` (its path, e.g.
/// `"sticky::x"`). In the parent, asserts that the child ran that one test and passed.
pub fn in_child(name: &str, body: impl FnOnce()) {
    in_child_with(name, |_| {}, body);
}

/// [`in_child`], with `configure` adjusting the child's command first (its environment, say).
/// Returns the child's stdout in the parent (also printed, so a failure shows it), and an empty
/// string in the child.
pub fn in_child_with(
    name: &str,
    configure: impl FnOnce(&mut Command),
    body: impl FnOnce(),
) -> String {
    in_child_output(name, configure, body).0
}

/// [`in_child_with`], returning the child's stdout and stderr (empty strings in the child).
pub fn in_child_output(
    name: &str,
    configure: impl FnOnce(&mut Command),
    body: impl FnOnce(),
) -> (String, String) {
    if std::env::var(CHILD_ENV).is_ok_and(|n| n == name) {
        body();
        return (String::new(), String::new());
    }
    let out = run_child(name, |cmd| {
        cmd.env(CHILD_ENV, name);
        configure(cmd);
    });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    print!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child running {name} failed ({}):\n{stdout}\n{stderr}",
        out.status,
    );
    (stdout, stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_child_that_ends_gives_its_status_and_output() {
        let out = output_within(
            sh("echo out; echo err >&2; exit 3"),
            "t",
            Duration::from_secs(60),
            OUTPUT_GRACE,
        );
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    #[should_panic(expected = "ran past 1s")]
    fn a_child_past_its_limit_is_killed_and_fails_the_test() {
        output_within(
            sh("sleep 30"),
            "t",
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
    }

    #[test]
    fn an_ended_child_whose_pipe_another_process_holds_open_does_not_hold_up_the_test() {
        // The background `sleep` inherits stdout and keeps it open after the shell has ended.
        let started = Instant::now();
        let out = output_within(
            sh("sleep 20 & echo hi"),
            "t",
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("still open"),
            "{out:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "waited for the pipe's holder"
        );
    }
}
