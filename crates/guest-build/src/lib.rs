//! Building the repository's example guests (examples/guests) for the test suites, the benchmark
//! and `gpuhost run --example`: `cargo build --release --target wasm32-wasip2`, once, into
//! target/guests. [`build_workspace`] builds another guest workspace the same way (the test
//! guests of crates/gpuhost-wasm/tests/guests). Tooling, kept out of gpuhost-wasm's API.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder holding `<name>.wasm` for each guest in examples/guests: `$GPUHOST_GUEST_DIR` if
/// set (prebuilt guests, for machines without the wasm32-wasip2 toolchain), else built now from
/// `repo_root/examples/guests` with the `cargo` that runs us (`$CARGO`).
pub fn build(repo_root: &Path) -> Result<PathBuf, String> {
    build_workspace(repo_root, "examples/guests")
}

/// [`build`] for the guest workspace at `repo_root/workspace` (a folder with a Cargo.toml).
pub fn build_workspace(repo_root: &Path, workspace: &str) -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("GPUHOST_GUEST_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let target = repo_root.join("target/guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(repo_root.join(workspace).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .status()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building {workspace} failed ({status}); install the target with `rustup target add wasm32-wasip2`, or set GPUHOST_GUEST_DIR to prebuilt guests"
        ));
    }
    Ok(target.join("wasm32-wasip2/release"))
}
