//! The `gpuhost` binary end to end, as a user runs it: on softcuda in CI, on the GPU where one is.

use std::path::PathBuf;
use std::process::{Command, Output};

mod serve;

/// The built `gpuhost` binary: cargo puts it one folder above this test binary (target/*/deps).
fn gpuhost() -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("gpuhost"))
        .expect("target folder");
    assert!(
        bin.is_file(),
        "cargo builds {} for this test",
        bin.display()
    );
    let mut cmd = Command::new(bin);
    // Run from the checkout root so `--example` finds examples/guests.
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo"));
    cmd.current_dir(crate_dir.join("../.."));
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `gpuhost run --example saxpy` with `flags`, asserting it printed its checked result.
fn run_saxpy(flags: &[&str]) {
    let out = gpuhost()
        .args(["run", "--example", "saxpy"])
        .args(flags)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("saxpy ok"),
        "{}",
        text(&out)
    );
}

#[test]
fn run_example_saxpy_builds_the_guest_and_prints_its_checked_result() {
    run_saxpy(&[]);
}

#[test]
fn run_of_a_missing_file_fails_with_a_message_naming_it() {
    let out = gpuhost()
        .args(["run", "no-such-guest.wasm"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-guest.wasm") && err.contains("does not exist"),
        "{}",
        text(&out)
    );
}

#[test]
fn run_of_a_file_that_is_not_a_component_says_so_before_opening_the_device() {
    let path =
        std::env::temp_dir().join(format!("gpuhost-cli-not-wasm-{}.wasm", std::process::id()));
    std::fs::write(&path, b"definitely not wasm").unwrap();
    let out = gpuhost().arg("run").arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).trim().is_empty(),
        "{}",
        text(&out)
    );
}

#[test]
fn doctor_names_the_driver_it_runs_on_and_its_devices() {
    let out = gpuhost().arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("driver: "), "{}", text(&out));
    assert!(stdout.contains("[0] "), "{}", text(&out));
}

#[test]
fn run_takes_the_sandbox_flags_runs_trusted_on_request_and_refuses_a_zero_kernel_time() {
    run_saxpy(&["--trusted", "--max-kernel-ms", "5000"]);
    let out = gpuhost()
        .args(["run", "--example", "saxpy", "--max-kernel-ms", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--max-kernel-ms"),
        "{}",
        text(&out)
    );
}

#[test]
fn bench_guest_measures_launches_and_64_mib_transfers_on_both_sides() {
    let json =
        std::env::temp_dir().join(format!("gpuhost-bench-guest-{}.json", std::process::id()));
    let out = gpuhost()
        .args(["bench", "--guest", "--quick", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for row in [
        "| bound launch, in bursts of 32 |",
        "| sandboxed guest |",
        "| 64 MiB transfer |",
        "| device → host, read-stream |",
        "| guest launch (observed pass) |",
        "| bound launch, alone on an idle stream |",
        "| bound launch by its own enqueue, alone on an idle stream |",
        "Alone on an idle stream, each side less its own clock read pair",
        "Each trusted pass against the native pass run just before it (4 pairs)",
        "Each sandboxed pass against the trusted pass beside it (4 pairs)",
        "| the same, on the guests' executor |",
    ] {
        assert!(stdout.contains(row), "no {row:?} in:\n{stdout}");
    }
    let report = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    // Every measured duration is a positive number of nanoseconds (values, not speed: speed is
    // for the bench run on the GPU).
    for key in [
        "pinned_ns",
        "pageable_ns",
        "pageable_awaited_ns",
        "guest_transfer_ns",
    ] {
        let at = report
            .find(&format!("\"{key}\":["))
            .unwrap_or_else(|| panic!("{key}: {report}"));
        let list = &report[at + key.len() + 4..];
        let list = &list[..list.find(']').unwrap()];
        assert!(
            list.split(',')
                .all(|n| n.trim().parse::<u64>().is_ok_and(|v| v > 0)),
            "{key}: {list}"
        );
    }
    // A top-level number of the report.
    let number = |key: &str| {
        report
            .split(&format!("\"{key}\":"))
            .nth(1)
            .and_then(|v| v.split([',', '}']).next())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    for key in ["guest_stream_read_ns", "guest_build_ns"] {
        assert!(number(key).is_some_and(|v| v > 0), "{key}: {report}");
    }
    assert!(report.contains("\"transfer_bytes\":67108864"), "{report}");
    // The host-time split: each path's whole launch and its host part, both measured.
    let host_time = report
        .split("\"host_time\":")
        .nth(1)
        .unwrap_or_else(|| panic!("no host_time: {report}"));
    let numbers: Vec<u64> = host_time
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 8, "{host_time}");
    assert!(numbers.iter().all(|&n| n > 0), "{host_time}");
    assert!(
        numbers.chunks(2).all(|p| p[1] <= p[0]),
        "a host part longer than its whole launch: {host_time}"
    );
}
