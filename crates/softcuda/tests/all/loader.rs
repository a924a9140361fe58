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
