//! Where the example guests are: `$GPUHOST_GUEST_DIR` (prebuilt), else built from the checkout's
//! examples/guests with cargo — installing the wasm32-wasip2 target with rustup first if needed,
//! so `gpuhost run --example saxpy` works on a fresh clone.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The folder holding `<name>.wasm` for every example guest.
pub fn dir() -> Result<PathBuf> {
    // With prebuilt guests, guest_build::build returns their folder and ignores the root.
    let root = if std::env::var_os("GPUHOST_GUEST_DIR").is_some() {
        PathBuf::new()
    } else {
        let root = checkout_root()?;
        ensure_wasm_target();
        root
    };
    guest_build::build(&root).map_err(anyhow::Error::msg)
}

/// The nearest folder, from the current one upwards, holding examples/guests/Cargo.toml.
fn checkout_root() -> Result<PathBuf> {
    let here = std::env::current_dir().context("reading the current folder")?;
    for dir in here.ancestors() {
        if dir.join("examples/guests/Cargo.toml").is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    bail!(
        "no examples/guests/Cargo.toml in {} or above: run from a gpuhost checkout, or set GPUHOST_GUEST_DIR to a folder of prebuilt guests",
        here.display()
    )
}

/// Adds the wasm32-wasip2 target when rustup is there and lacks it; otherwise leaves the build
/// to report what is missing.
fn ensure_wasm_target() {
    let Ok(out) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return;
    };
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == "wasm32-wasip2")
    {
        return;
    }
    eprintln!("gpuhost: installing the wasm32-wasip2 target (rustup target add wasm32-wasip2)");
    let _ = Command::new("rustup")
        .args(["target", "add", "wasm32-wasip2"])
        .status();
}
