//! GPUHOST_DRIVER=nvidia on a machine without NVIDIA's driver: NoDriver, never a panic. The
//! driver choice is process-wide, so the probe runs in a child process (this binary again).

use std::process::Command;

const CHILD: &str = "GPUHOST_TEST_NODRIVER_CHILD";

#[test]
fn forcing_nvidia_without_its_driver_is_no_driver_not_a_panic() {
    if std::env::var_os(CHILD).is_some() {
        // In the child: report what host(0) gave, for the parent to check.
        match gpuhost::host(0) {
            Ok(_) => println!("probe: ok {}", gpuhost::driver().unwrap().kind),
            Err(gpuhost::Error::NoDriver { reason }) => println!("probe: no driver: {reason}"),
            Err(e) => println!("probe: other error: {e}"),
        }
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "nodriver::forcing_nvidia_without_its_driver_is_no_driver_not_a_panic",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("GPUHOST_DRIVER", "nvidia")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed (panic?):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The harness prints the test's name on the same line, before the probe.
    let probe = stdout
        .lines()
        .find_map(|l| l.find("probe: ").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no probe line:\n{stdout}"));
    println!("{probe}");
    // Where NVIDIA's driver exists the forced choice must be it (never softcuda); elsewhere NoDriver.
    assert!(
        probe == "probe: ok nvidia" || probe.starts_with("probe: no driver: "),
        "unexpected: {probe}"
    );
}

/// A driver test the next test re-runs in a child process with the loader broken.
#[test]
fn a_driver_test_allocates_on_the_host() {
    let Some(host) = crate::common::host() else {
        return;
    };
    let buf = host.alloc(64).expect("alloc");
    assert_eq!(buf.len(), 64);
}

/// The CI rule (issue #8): a missing softcuda library fails the suite instead of turning it into
/// green "skipped" lines; only GPUHOST_TEST_ALLOW_SKIP=1 turns the failure into a visible skip.
#[test]
fn a_broken_loader_fails_driver_tests_unless_skipping_is_allowed() {
    const VICTIM: &str = "nodriver::a_driver_test_allocates_on_the_host";
    let broken = |cmd: &mut Command| {
        cmd.env("GPUHOST_DRIVER", "softcuda")
            .env("SOFTCUDA_LIB", "/nonexistent/libsoftcuda.so")
            .env_remove(testkit::ALLOW_SKIP_ENV);
    };
    let out = testkit::run_child(VICTIM, broken);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "the suite passed with no loadable driver:\n{text}"
    );
    assert!(
        text.contains("no driver loaded"),
        "failed for another reason:\n{text}"
    );

    let out = testkit::run_child(VICTIM, |cmd| {
        broken(cmd);
        cmd.env(testkit::ALLOW_SKIP_ENV, "1");
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "allowed skip still failed:\n{stdout}");
    assert!(
        stdout.contains("skipped: no driver"),
        "no visible skip line:\n{stdout}"
    );
}
