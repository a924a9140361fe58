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
