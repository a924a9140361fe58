//! Plain C programs linked with `-lcuda` run on softcuda through LD_LIBRARY_PATH pointing at a
//! folder where `libcuda.so` is a link to the built `libsoftcuda.so`: the classic module API
//! (vector_add.c) and the library API (library_api.c).

use std::path::PathBuf;
use std::process::Command;

use softcuda::loader;

/// The built libsoftcuda.so (beside this test binary, as cargo lays it out).
fn soft_lib() -> PathBuf {
    loader::soft_lib_candidates()
        .into_iter()
        .find(|p| p.is_file())
        .expect("cargo builds libsoftcuda.so beside the test binary")
}

/// Compiles tests/c/`name`.c with `cc`, linked with `-lcuda` against a folder where
/// `libcuda.so` is the built libsoftcuda.so, runs it from there with a 1 GiB device, checks that
/// it exited 0 and returns what it printed.
fn run_c_program(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("softcuda-ctest-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libcuda.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(soft_lib(), &link).unwrap();
    let src = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("tests/c")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let cc = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&dir)
        .arg("-lcuda")
        .output()
        .expect("a C compiler (`cc`) is needed for this test");
    assert!(
        cc.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &dir)
        .env("SOFTCUDA_MEMORY", "1073741824")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
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
