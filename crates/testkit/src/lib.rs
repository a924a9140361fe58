//! Test support shared by the workspace's integration-test binaries: running one test in a child
//! process, for state that lasts as long as the process does — a kernel fault poisons the device
//! until the process exits (on NVIDIA's driver and on softcuda alike), and the driver is chosen
//! once per process.
#![deny(missing_docs)]

use std::process::Command;

/// Names the test a child process started by [`in_child`] runs.
const CHILD_ENV: &str = "GPUHOST_TEST_CHILD";

/// Whether this process is a child started by [`in_child`] or [`in_child_with`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
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
