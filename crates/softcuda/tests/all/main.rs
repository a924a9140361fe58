//! softcuda's integration tests: the C ABI called from Rust (the rlib's `extern "C"` fns), the
//! loader + cudarc path into the built `libsoftcuda.so`, and a C program linked with `-lcuda`.

mod boundaries;
mod common;
mod context;
mod cprog;
mod device;
mod graph_edit;
mod images;

mod library;
mod loader;
mod memory;
mod module;
mod pools;
mod stream;
mod vmm;
