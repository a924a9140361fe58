//! Plain C programs linked with `-lcuda` run on softcuda through LD_LIBRARY_PATH pointing at a
//! folder where `libcuda.so` is a link to the built `libsoftcuda.so`: the classic module API
//! (vector_add.c), the library API (library_api.c), and a CUDA runtime program linked with
//! NVIDIA's `libcudart.so.13` (cudart_memory.c), which shows how far that runtime gets (with
//! gpuhost's own runtime, crates/softcudart, the same program runs: its tests).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use softcuda::loader;

/// The built libsoftcuda.so (beside this test binary, as cargo lays it out).
fn soft_lib() -> PathBuf {
    loader::soft_lib_candidates()
        .into_iter()
        .find(|p| p.is_file())
        .expect("cargo builds libsoftcuda.so beside the test binary")
}

/// Where NVIDIA's runtime is looked for: `$GPUHOST_CUDART_DIR` (searched for `libcudart.so.13`),
/// then `target/nvcc`, where .ci/run installs the `nvidia-cuda-runtime` wheel (with nvcc's).
const CUDART_ENV: &str = "GPUHOST_CUDART_DIR";

/// The folder holding `libcudart.so.13`, if any is found.
fn find_cudart() -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = std::env::var_os(CUDART_ENV)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.push(
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../target/nvcc"),
    );
    roots.iter().find_map(|root| search_cudart(root, 0))
}

/// Depth-limited search for `libcudart.so.13` (the wheel keeps it in `nvidia/cu13/lib`).
fn search_cudart(dir: &Path, depth: u32) -> Option<PathBuf> {
    if dir.join("libcudart.so.13").is_file() {
        return Some(dir.to_path_buf());
    }
    if depth >= 4 {
        return None;
    }
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .find_map(|d| search_cudart(&d, depth + 1))
}

/// Compiles tests/c/`name`.c with `cc`, linked with `-lcuda` against a folder where `libcuda.so`
/// and `libcuda.so.1` are the built libsoftcuda.so (plus `libs`: (folder, file) pairs linked by
/// file name), runs it from there with a 1 GiB device and returns its output.
fn build_and_run(name: &str, libs: &[(PathBuf, &str)]) -> Output {
    let dir = std::env::temp_dir().join(format!("softcuda-ctest-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["libcuda.so", "libcuda.so.1"] {
        let link = dir.join(file);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(soft_lib(), &link).unwrap();
    }
    let src = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
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
    let cc = cc
        .output()
        .expect("a C compiler (`cc`) is needed for this test");
    assert!(
        cc.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe)
        .env("LD_LIBRARY_PATH", std::env::join_paths(&lib_path).unwrap())
        .env("SOFTCUDA_MEMORY", "1073741824")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// [`build_and_run`] with `-lcuda` only; checks that the program exited 0 and returns what it
/// printed.
fn run_c_program(name: &str) -> String {
    let run = build_and_run(name, &[]);
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

#[test]
fn c_program_linked_with_lcuda_runs_vector_add_on_softcuda() {
    let stdout = run_c_program("vector_add");
    assert!(stdout.contains("before init: 3"), "{stdout}");
    assert!(stdout.contains("device: softcuda"), "{stdout}");
    assert!(
        stdout.contains("total: 1073741824"),
        "SOFTCUDA_MEMORY sizes the device: {stdout}"
    );
    assert!(stdout.contains("vector_add ok"), "{stdout}");
}

#[test]
fn c_program_on_the_library_api_launches_a_cukernel_in_two_contexts() {
    let stdout = run_c_program("library_api");
    assert!(stdout.contains("kernels: 1, first: scale"), "{stdout}");
    assert!(stdout.contains("library ok"), "{stdout}");
}

/// NVIDIA's libcudart 13 initialises on softcuda through cuGetProcAddress (its driver table) and
/// cuDriverGetVersion, then needs NVIDIA's private runtime interface from cuGetExportTable,
/// which softcuda does not have (docs/SOFTCUDA.md, "Missing"): the first call that
/// needs a device fails with a runtime error, cleanly, with no crash.
#[test]
fn libcudart_13_initialises_on_softcuda_and_stops_cleanly_at_the_private_runtime_interface() {
    let Some(cudart) = find_cudart() else {
        // CI installs NVIDIA's runtime wheel (.ci/run); there, a missing library is a failure.
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "libcudart.so.13 not found: .ci/run installs it into target/nvcc"
        );
        println!("skipped: no libcudart.so.13 (set {CUDART_ENV} to a folder holding it)");
        return;
    };
    let run = build_and_run("cudart_memory", &[(cudart, "libcudart.so.13")]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(1),
        "the program reports the failure and exits 1 (no signal)\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("driver 13000 runtime 13000"), "{stdout}");
    assert!(
        stdout.contains("cudaGetDeviceCount(&count) failed:"),
        "{stdout}"
    );
}
