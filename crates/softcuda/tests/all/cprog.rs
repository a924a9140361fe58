//! A plain C program linked with `-lcuda` runs on softcuda through LD_LIBRARY_PATH pointing at a
//! folder where `libcuda.so` is a link to the built `libsoftcuda.so`.

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

#[test]
fn c_program_linked_with_lcuda_runs_vector_add_on_softcuda() {
    let dir = std::env::temp_dir().join(format!("softcuda-ctest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libcuda.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(soft_lib(), &link).unwrap();
    let src =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("tests/c/vector_add.c");
    let exe = dir.join("vector_add");
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
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        run.status.success(),
        "program failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("before init: 3"), "{stdout}");
    assert!(stdout.contains("device: softcuda"), "{stdout}");
    assert!(
        stdout.contains("total: 1073741824"),
        "SOFTCUDA_MEMORY sizes the device: {stdout}"
    );
    assert!(stdout.contains("vector_add ok"), "{stdout}");
}
