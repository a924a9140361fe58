//! Links the cdylib as NVIDIA's runtime is linked: SONAME `libcudart.so.13`, and a version node
//! of that name, which every runtime symbol of an nvcc-built program asks for
//! (`cudaMalloc@libcudart.so.13`). The symbols are bound to the node in src/lib.rs (`.symver`),
//! because rustc's own version script already claims every `#[no_mangle]` export for the base
//! version.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let map = out.join("libcudart.map");
    std::fs::write(&map, "libcudart.so.13 { };\n").expect("OUT_DIR is writable");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudart.so.13");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
