//! The loader binds cudarc to the built libsoftcuda.so. Only `Preference::Softcuda` is used here
//! so the same binary behaves the same on a machine with NVIDIA's driver.

use softcuda::loader::{self, DriverKind, Preference};

#[test]
fn select_softcuda_routes_cudarc_calls_to_softcuda() {
    let choice = loader::select(Preference::Softcuda).expect("select softcuda");
    assert_eq!(choice.kind, DriverKind::Soft);
    assert!(
        choice.path.ends_with("libsoftcuda.so"),
        "{}",
        choice.path.display()
    );
    assert!(!choice.reason.is_empty());

    cudarc::driver::result::init().expect("cuInit through cudarc");
    assert_eq!(cudarc::driver::result::device::get_count().unwrap(), 1);
    let dev = cudarc::driver::result::device::get(0).unwrap();
    assert_eq!(
        cudarc::driver::result::device::get_name(dev).unwrap(),
        "softcuda"
    );
}

#[test]
fn select_is_idempotent_and_refuses_to_swap_drivers() {
    let first = loader::select(Preference::Softcuda).unwrap();
    let again = loader::select(Preference::Softcuda).unwrap();
    assert_eq!(first, again);
    assert_eq!(loader::select(Preference::Auto).unwrap(), first);
    assert_eq!(loader::selected(), Some(first));
    let err = loader::select(Preference::Nvidia).unwrap_err();
    assert!(
        matches!(err, softcuda::LoaderError::AlreadySelected { .. }),
        "{err}"
    );
}

#[test]
fn cudarc_runs_a_kernel_on_softcuda_after_select() {
    use cudarc::driver::result;
    use std::ffi::{CString, c_void};

    loader::select(Preference::Softcuda).expect("select softcuda");
    let ptx = CString::new(include_str!("../fixtures/kernels.ptx")).unwrap();
    // SAFETY: the cudarc result layer over softcuda; every pointer passed is valid for the call.
    unsafe {
        result::init().unwrap();
        let dev = result::device::get(0).unwrap();
        let ctx = result::primary_ctx::retain(dev).unwrap();
        result::ctx::set_current(ctx).unwrap();
        let module = result::module::load_data(ptx.as_ptr().cast()).unwrap();
        let f = result::module::get_function(module, CString::new("vector_add").unwrap()).unwrap();
        let n = 300usize;
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (a, b, c) = (
            result::malloc_sync(n * 4).unwrap(),
            result::malloc_sync(n * 4).unwrap(),
            result::malloc_sync(n * 4).unwrap(),
        );
        result::memcpy_htod_sync(a, &xs).unwrap();
        result::memcpy_htod_sync(b, &xs).unwrap();
        let (mut pa, mut pb, mut pc, mut pn) = (a, b, c, n as i32);
        let mut params: [*mut c_void; 4] = [
            (&raw mut pa).cast(),
            (&raw mut pb).cast(),
            (&raw mut pc).cast(),
            (&raw mut pn).cast(),
        ];
        result::launch_kernel(
            f,
            (3, 1, 1),
            (128, 1, 1),
            0,
            std::ptr::null_mut(),
            &mut params,
        )
        .unwrap();
        result::ctx::synchronize().unwrap();
        let mut out = vec![0f32; n];
        result::memcpy_dtoh_sync(&mut out, c).unwrap();
        assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
        for p in [a, b, c] {
            result::free_sync(p).unwrap();
        }
        result::module::unload(module).unwrap();
        result::primary_ctx::release(dev).unwrap();
    }
}

#[test]
fn auto_falls_back_to_softcuda_when_nvidia_libcuda_has_no_device() {
    use std::process::Command;
    // Selection is process-wide, so the choice is made in a child, with a libcuda.so whose cuInit
    // fails first on the library path.
    let dir = std::env::temp_dir().join(format!("softcuda-nodev-{}", std::process::id()));
    let in_parent = !crate::common::is_child();
    if in_parent {
        std::fs::create_dir_all(&dir).unwrap();
        let src = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
            .join("tests/c/no_device_libcuda.c");
        let cc = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(dir.join("libcuda.so"))
            .arg(&src)
            .output()
            .expect("a C compiler (`cc`) is needed for this test");
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
    }
    let out = crate::common::in_child(
        "loader::auto_falls_back_to_softcuda_when_nvidia_libcuda_has_no_device",
        |cmd| {
            cmd.env("LD_LIBRARY_PATH", &dir)
                .env_remove(loader::PREFERENCE_ENV);
        },
        || {
            let choice = loader::select(Preference::Auto).expect("auto selects a driver");
            println!("chose={} reason={}", choice.kind, choice.reason);
            assert_eq!(choice.kind, DriverKind::Soft);
        },
    );
    if in_parent {
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.contains("chose=softcuda"), "{out}");
        assert!(
            out.contains("cuInit failed with CUresult 100"),
            "the reason names the failure: {out}"
        );
    }
}
