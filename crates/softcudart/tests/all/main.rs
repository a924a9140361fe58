//! Programs built by nvcc with `-cudart shared` run unmodified on softcuda through softcudart:
//! each is compiled with NVIDIA's nvcc (from its public wheels; .ci/run installs them into
//! target/nvcc) and linked against NVIDIA's libcudart as a user would, then run from a folder
//! where `libcudart.so.13` is the built libsoftcudart.so and `libcuda.so.1` the built
//! libsoftcuda.so. The programs check their own results and print a last "ok" line (each
//! mismatch with NVIDIA's runtime's answer is printed with its line); they are in
//! crates/softcuda/tests (runtime/*.cu, c/cudart_memory.c), where the GPU host builds them too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The CUDA tree holding `bin/nvcc` (as .ci/run sets it).
const NVCC_ENV: &str = "GPUHOST_NVCC_DIR";

/// nvcc's CUDA tree: `$GPUHOST_NVCC_DIR`, else where .ci/run installs the wheels.
fn find_nvcc() -> Option<PathBuf> {
    let installed = manifest_dir().join("../../target/nvcc/nvidia/cu13");
    let tree = std::env::var_os(NVCC_ENV).map_or(installed, PathBuf::from);
    tree.join("bin/nvcc").is_file().then_some(tree)
}

fn manifest_dir() -> PathBuf {
    // Read at run time (the house rule for fixtures): a test binary moved to another tree finds
    // that tree's files.
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// The built libsoftcudart.so: cargo puts the cdylib in `deps/` beside this test binary (and a
/// copy one level up).
fn runtime_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary is in a folder");
    [deps, deps.parent().unwrap_or(deps)]
        .iter()
        .map(|dir| dir.join("libsoftcudart.so"))
        .find(|p| p.is_file())
        .expect("cargo builds libsoftcudart.so beside the test binary")
}

/// The built libsoftcuda.so (a dev-dependency, so cargo builds it too).
fn driver_lib() -> PathBuf {
    softcuda::loader::soft_lib_candidates()
        .into_iter()
        .find(|p| p.is_file())
        .expect("cargo builds libsoftcuda.so beside the test binary")
}

/// nvcc's tree, or `None` (the test is skipped) outside CI when it is not installed.
fn nvcc_or_skip() -> Option<PathBuf> {
    let found = find_nvcc();
    if found.is_none() {
        // CI installs nvcc's wheels (.ci/run); there, a missing nvcc is a failure.
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "nvcc not found: .ci/run installs it into target/nvcc"
        );
        println!("skipped: no nvcc (set {NVCC_ENV} to a CUDA tree holding bin/nvcc)");
    }
    found
}

/// A scratch folder with the two libraries under the names a program loads.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("softcudart-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (file, target) in [
            ("libcudart.so.13", runtime_lib()),
            ("libcuda.so.1", driver_lib()),
        ] {
            let link = dir.join(file);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds `source` (under crates/softcuda/tests) with nvcc and `flags` into `scratch`, linked
/// against NVIDIA's libcudart in nvcc's tree as a user would link it; returns the executable.
fn build(nvcc: &Path, scratch: &Scratch, source: &str, flags: &[&str]) -> PathBuf {
    let name = Path::new(source).file_stem().unwrap().to_str().unwrap();
    let exe = scratch.0.join(name);
    let build = Command::new(nvcc.join("bin/nvcc"))
        .args(["-cudart", "shared"])
        .args(flags)
        .arg(manifest_dir().join("../softcuda/tests").join(source))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("nvcc runs");
    assert!(
        build.status.success(),
        "nvcc {source} failed:\n{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    exe
}

/// Runs `exe` with `LD_LIBRARY_PATH` = its scratch folder and a 1 GiB softcuda device.
fn run(exe: &Path, scratch: &Scratch) -> Output {
    Command::new(exe)
        .env("LD_LIBRARY_PATH", &scratch.0)
        .env("SOFTCUDA_MEMORY", "1073741824")
        .output()
        .unwrap()
}

/// Builds `source` in a scratch folder of its own (`label`: tests run in parallel), runs it on
/// softcuda through softcudart, checks that it exited 0, and returns its output.
fn build_and_run(nvcc: &Path, label: &str, source: &str, flags: &[&str]) -> String {
    let scratch = Scratch::new(label);
    let run = run(&build(nvcc, &scratch, source, flags), &scratch);
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{source} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        run.status
    );
    stdout
}

/// sm_90 machine code for the GPU host plus compute_90 PTX, which softcuda runs.
const SM90_WITH_PTX: &str = "-gencode=arch=compute_90,code=[sm_90,compute_90]";

#[test]
fn nvcc_built_scale_add_launches_with_triple_chevrons_on_softcuda() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let out = build_and_run(&nvcc, "sm90", "runtime/scale_add.cu", &[SM90_WITH_PTX]);
    assert!(
        out.contains("scale_add: 1000 elements"),
        "device printf: {out}"
    );
    assert!(out.contains("runtime scale_add ok"), "{out}");
}

#[test]
fn nvcc_default_build_with_compressed_ptx_runs_on_softcuda() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    // No -gencode: nvcc's default target, whose PTX it embeds compressed.
    let out = build_and_run(&nvcc, "default", "runtime/scale_add.cu", &[]);
    assert!(out.contains("runtime scale_add ok"), "{out}");
}

#[test]
fn cudart_memory_program_allocates_fills_and_copies_through_softcudart() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let out = build_and_run(&nvcc, "memory", "c/cudart_memory.c", &[]);
    assert!(out.contains("driver 13000 runtime 13000"), "{out}");
    assert!(out.contains("devices 1"), "{out}");
    assert!(out.contains("max threads 1024"), "{out}");
    assert!(out.contains("cudart memory ok"), "{out}");
}

#[test]
fn runtime_semantics_program_sees_documented_errors_streams_variables_managed_memory_and_resets() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let out = build_and_run(
        &nvcc,
        "semantics",
        "runtime/runtime_semantics.cu",
        &[SM90_WITH_PTX],
    );
    assert!(out.contains("runtime semantics ok"), "{out}");
}

#[test]
fn runtime_features_program_captures_and_launches_graphs_allocates_in_stream_order_and_sets_attributes()
 {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let out = build_and_run(
        &nvcc,
        "features",
        "runtime/runtime_features.cu",
        &[SM90_WITH_PTX],
    );
    assert!(out.contains("runtime features ok"), "{out}");
}

#[test]
fn managed_variables_are_shared_by_host_code_and_kernels() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let out = build_and_run(
        &nvcc,
        "managed",
        "runtime/runtime_managed.cu",
        &[SM90_WITH_PTX],
    );
    assert!(out.contains("runtime managed ok"), "{out}");
}

/// Whether the executable `exe` names `symbol` (its dynamic symbol table holds the name,
/// NUL-terminated): how the tests see which runtime entry points a build calls.
fn names_symbol(exe: &Path, symbol: &str) -> bool {
    let bytes = std::fs::read(exe).expect("the built program is readable");
    let wanted = format!("\0{symbol}\0").into_bytes();
    bytes.windows(wanted.len()).any(|w| w == wanted.as_slice())
}

#[test]
fn per_thread_default_stream_build_runs_with_each_thread_its_own_stream_0() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let scratch = Scratch::new("per-thread");
    let flags = [SM90_WITH_PTX, "--default-stream", "per-thread"];
    let exe = build(&nvcc, &scratch, "runtime/runtime_per_thread.cu", &flags);
    // The build calls the per-thread forms, not the legacy ones.
    for symbol in [
        "__cudaLaunchKernel_ptsz",
        "cudaMemcpy_ptds",
        "cudaStreamSynchronize_ptsz",
    ] {
        assert!(
            names_symbol(&exe, symbol),
            "the program does not call {symbol}"
        );
    }
    assert!(!names_symbol(&exe, "cudaMemcpy"));
    let run = run(&exe, &scratch);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("runtime per-thread ok"), "{stdout}");
}

#[test]
fn sm90_machine_code_alone_is_no_kernel_image_for_softcuda() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    let scratch = Scratch::new("cubin-only");
    let flags = ["-gencode=arch=compute_90,code=sm_90"];
    let run = run(
        &build(&nvcc, &scratch, "runtime/scale_add.cu", &flags),
        &scratch,
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    // The launch reports why the kernel could not be found, as NVIDIA's runtime would on a
    // GPU the fatbin has no code for.
    assert!(
        stdout.contains("no kernel image is available for execution on the device"),
        "{stdout}"
    );
}

/// Whether the system's loader path has a libcuda.so.1 (NVIDIA's driver installed).
fn system_driver() -> bool {
    // SAFETY: a constant NUL-terminated name; the handle, if any, is closed at once.
    unsafe {
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if lib.is_null() {
            return false;
        }
        libc::dlclose(lib);
    }
    true
}

#[test]
fn without_a_driver_the_version_is_0_and_device_calls_say_the_driver_is_insufficient() {
    let Some(nvcc) = nvcc_or_skip() else { return };
    if system_driver() {
        println!("skipped: a libcuda.so.1 is installed, so the program would find a driver");
        return;
    }
    let scratch = Scratch::new("no-driver");
    let exe = build(&nvcc, &scratch, "c/cudart_memory.c", &[]);
    std::fs::remove_file(scratch.0.join("libcuda.so.1")).unwrap();
    let out = run(&exe, &scratch);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("driver 0 runtime 13000"), "{stdout}");
    assert!(
        stdout
            .contains("failed: 35 (CUDA driver version is insufficient for CUDA runtime version)"),
        "{stdout}"
    );
}
