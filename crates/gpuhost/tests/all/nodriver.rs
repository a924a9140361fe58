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
