//! Gives the cdylib the SONAME `libcuda.so`, so that once the loader has opened it, a later
//! `dlopen("libcuda.so")` (cudarc's) returns this already-loaded object.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so");
    println!("cargo:rerun-if-changed=build.rs");
}
