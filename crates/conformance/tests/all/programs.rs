//! Third-party-style C programs (crates/conformance/tests/c/*.c) built with `cc` and run against
//! the selected driver: a folder holding `libcuda.so` and `libcuda.so.1` links to the libcuda
//! the loader chose (softcuda in CI, NVIDIA's on the H200) is both the link path and the
//! program's LD_LIBRARY_PATH, so the same program tests both.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use conformance::driver::shared_device;

use crate::support::env_or_skip;

/// Where NVRTC is looked for: `$GPUHOST_NVRTC_DIR` (searched for `libnvrtc.so.*`), then
/// `target/nvrtc` (where .ci/run installs NVIDIA's `nvidia-cuda-nvrtc` wheel), then the CUDA
/// toolkit's usual folders.
const NVRTC_ENV: &str = "GPUHOST_NVRTC_DIR";

/// The folder holding NVRTC's library and the file name to link, if any is found.
fn find_nvrtc() -> Option<(PathBuf, String)> {
    let mut roots: Vec<PathBuf> = std::env::var_os(NVRTC_ENV)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(manifest) = std::env::var("CARGO_MANIFEST_DIR") {
        roots.push(PathBuf::from(manifest).join("../../target/nvrtc"));
    }
    roots.extend(
        [
            "/usr/local/cuda/lib64",
            "/usr/local/cuda/targets/x86_64-linux/lib",
        ]
        .map(PathBuf::from),
    );
    roots.iter().find_map(|root| search(root, 0))
}

/// Depth-limited search for `libnvrtc.so.<major>` (not the builtins or the .alt variant).
fn search(dir: &Path, depth: u32) -> Option<(PathBuf, String)> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut subdirs = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if path.is_dir() {
            subdirs.push(path);
        } else if name.starts_with("libnvrtc.so.") && name.matches('.').count() == 2 {
            return Some((dir.to_path_buf(), name));
        }
    }
    if depth >= 5 {
        return None;
    }
    subdirs.iter().find_map(|d| search(d, depth + 1))
}

/// A scratch folder with `libcuda.so` / `libcuda.so.1` linking to the selected driver.
fn driver_dir(driver: &Path, program: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("conformance-{program}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    for name in ["libcuda.so", "libcuda.so.1"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(driver, &link).expect("symlink to the driver");
    }
    dir
}

/// Builds `tests/c/<program>.c` against the driver at `driver` (+ `libs`: (folder, file) pairs
/// to link by file name) and runs it; returns its output.
pub fn build_and_run(program: &str, driver: &Path, libs: &[(PathBuf, String)]) -> Output {
    let dir = driver_dir(driver, program);
    let src = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("tests/c")
        .join(format!("{program}.c"));
    let exe = dir.join(program);
    let mut cc = Command::new("cc");
    cc.arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&dir)
        .arg("-lcuda");
    let mut lib_path = vec![dir.clone()];
    for (folder, file) in libs {
        cc.arg("-L").arg(folder).arg(format!("-l:{file}"));
        lib_path.push(folder.clone());
    }
    let built = cc
        .arg("-lm")
        .output()
        .expect("a C compiler (`cc`) is needed for this test");
    assert!(
        built.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ld_path = std::env::join_paths(&lib_path).expect("paths without ':'");
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", ld_path)
        .env("SOFTCUDA_MEMORY", "1073741824")
        .output()
        .expect("run the program");
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Fails with the program's output unless it exited 0 and printed `ok_line`.
fn assert_ran(program: &str, out: &Output, ok_line: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(ok_line),
        "{program} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

#[test]
fn nvrtc_program_compiles_cuda_c_and_launches_it() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let Some(nvrtc) = find_nvrtc() else {
        // CI installs NVIDIA's nvrtc wheel (.ci/run); there, a missing library is a failure.
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "NVRTC not found: .ci/run installs it and sets {NVRTC_ENV}"
        );
        println!("skipped: no NVRTC (set {NVRTC_ENV} to a folder holding libnvrtc.so.*)");
        return;
    };
    let out = build_and_run("nvrtc_saxpy", &env.choice.path, &[nvrtc]);
    assert_ran("nvrtc_saxpy", &out, "nvrtc saxpy ok");
}
