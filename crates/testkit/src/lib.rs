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

use std::fmt::Display;
use std::process::{Command, Output};

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
    cmd.output().expect("run the test binary as a child")
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
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture"])
        .env(CHILD_ENV, name);
    configure(&mut cmd);
    let out = cmd.output().expect("run the test binary as a child");
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
