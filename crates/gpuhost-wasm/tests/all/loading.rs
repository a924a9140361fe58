//! Loading guests: each way a file can be wrong gets its own error.

use gpuhost_wasm::Error;

use crate::runtime;

#[test]
fn a_core_module_is_refused_as_not_a_component() {
    let Some(rt) = runtime() else { return };
    // The smallest valid core module: magic + version 1.
    match rt.load("core.wasm", b"\0asm\x01\0\0\0") {
        Err(Error::NotAComponent { what }) => assert_eq!(what, "core.wasm"),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn garbage_bytes_are_refused_as_an_invalid_component() {
    let Some(rt) = runtime() else { return };
    assert!(matches!(
        rt.load("junk", b"not wasm at all"),
        Err(Error::InvalidComponent { .. })
    ));
}

#[test]
fn a_missing_file_names_the_path() {
    let Some(rt) = runtime() else { return };
    let e = rt
        .load_file(std::path::Path::new("/nonexistent/guest.wasm"))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Read { .. }));
    assert!(e.to_string().contains("/nonexistent/guest.wasm"));
}

#[test]
fn a_guest_importing_an_interface_the_host_lacks_is_refused_naming_it() {
    let Some(rt) = runtime() else { return };
    let path = crate::guest_dir().join("alien.wasm");
    match rt.load_file(&path) {
        Err(e @ Error::MissingImport { .. }) => {
            assert!(e.to_string().contains("test:alien/probe"), "{e}")
        }
        other => panic!("expected MissingImport, got {:?}", other.err()),
    }
}

#[test]
fn a_bundle_for_sandboxed_guests_refuses_a_module_without_ptx_and_says_what_to_do() {
    let Some(rt) = runtime() else { return };
    let dir = bundle_dir("bundle");
    std::fs::write(
        dir.path().join("manifest.toml"),
        "name = \"sass-only\"\n[[module]]\nname = \"stamp\"\ncubin = { sm_90 = \"stamp.cubin\" }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("stamp.cubin"), b"\x7fELF not really").unwrap();
    let err = gpuhost_wasm::BundleRewrite::load(rt.host(), dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, Error::BundleNotConfinable { ref module, .. } if module == "stamp"),
        "{msg}"
    );
    assert!(
        msg.contains("no PTX") && msg.contains("sandbox = false"),
        "{msg}"
    );
}

#[test]
fn a_bundle_for_sandboxed_guests_refuses_ptx_the_sandbox_cannot_confine() {
    let Some(rt) = runtime() else { return };
    let dir = bundle_dir("bundle");
    std::fs::write(
        dir.path().join("manifest.toml"),
        "name = \"bulk\"\n[[module]]\nname = \"m\"\nptx = \"m.ptx\"\n",
    )
    .unwrap();
    // mbarrier's transaction counts (the bulk copies') are refused rather than fenced
    // (docs/ISOLATION.md); the rest of mbarrier runs as software barriers.
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n\
               .reg .b64 %rd<3>;\n.shared .align 8 .b64 bar;\nmov.u64 %rd1, bar;\n\
               mbarrier.expect_tx.shared.b64 [%rd1], 64;\nret;\n}\n";
    std::fs::write(dir.path().join("m.ptx"), ptx).unwrap();
    let err = gpuhost_wasm::BundleRewrite::load(rt.host(), dir.path()).unwrap_err();
    assert!(
        matches!(err, Error::BundleNotConfinable { .. }) && err.to_string().contains("mbarrier"),
        "{err}"
    );
}

/// A fresh bundle directory of this test process, removed when dropped.
struct BundleDir(std::path::PathBuf);

impl BundleDir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for BundleDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bundle_dir(tag: &str) -> BundleDir {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("gpuhost-wasm-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    BundleDir(dir)
}
