//! softcuda: a software CUDA driver. It exports libcuda's C ABI (same symbol names and struct
//! layouts as `cuda.h`, SONAME `libcuda.so`) and runs PTX on the CPU through the `ptxvm`
//! interpreter, so gpuhost and plain driver-API C programs run without a GPU.
//!
//! It also holds [`loader`], which picks NVIDIA's libcuda or softcuda for the process before
//! cudarc's first call.
//!
//! Layout: [`exports`] is the one list of C entry points; each is a thin shim over a driver-object
//! module that returns `Result<_, CUresult>` — the driver API's own error type:
//! `device`, `context` (primary/created contexts, per-thread stack, sticky errors), `stream`
//! (worker-thread queues, the legacy and per-thread default streams), `event`, `memory` (the allocation table), `copy` (memcpy/memset),
//! `pointer` (frees and pointer queries), `pool` (memory pools and stream-ordered
//! allocation), `memop` (stream memory operations: write and wait
//! values), `vmm` (virtual memory management: reservations, memfd-backed physical allocations,
//! mappings and access), `module` (+ `image` for fatbins/cubins, `jit` for the JIT log
//! options), `library` (cuLibrary*/cuKernel*: code loaded in no context, a module per context
//! on demand), `launch`, `printf` (the device printf FIFO), `graph`, `capture`, `graph_mem` and
//! `graph_copy` (graphs, stream capture, graph memory nodes and figures, memcpy nodes) and `procaddr` (cuGetProcAddress, cuGetExportTable); their exports are split
//! by area between `exports.rs` and `exports/*.rs`. `abi` holds the C-boundary helpers,
//! `handles` the handle tables, `result_text` the CUresult names and messages (cuGetErrorName /
//! cuGetErrorString), and `error` the loader's Rust error enum.
//!
//! Environment: `SOFTCUDA_MEMORY` sets the device memory size in bytes (default 16 GiB),
//! `SOFTCUDA_DEVICES` the number of devices (default 1), `SOFTCUDA_WATCHDOG_MS` stops a launch
//! that runs longer (default 60000, 0 = off) with `CUDA_ERROR_LAUNCH_TIMEOUT`, poisoning the
//! context as a GPU watchdog does, and `SOFTCUDA_RESIDENT_THREADS` (default unset: no limit)
//! caps the threads resident on a device at once, so that kernels wait for room as on a GPU
//! whose SMs are full (residency.rs). docs/SOFTCUDA.md lists what is missing.
//! Diagnostics: after a kernel fault, `softcuda_last_fault` (a softcuda-only export) describes it
//! (kernel, block, thread, PTX line).
#![deny(missing_docs)]

mod abi;
mod array;
mod capture;
mod context;
mod copy;
mod device;
mod driver;
mod error;
mod event;
#[macro_use]
mod export_macros;
pub mod exports;
mod fatbin_codec;
mod graph;
mod graph_copy;
mod graph_mem;
mod handles;
mod host_pages;
mod image;
mod jit;
mod launch;
mod library;
mod link;
pub mod loader;
mod managed_vars;
mod memop;
mod memory;
mod module;
mod pointer;
mod pool;
mod printf;
mod procaddr;
mod residency;
mod result_text;
mod running;
mod stream;
mod texobj;
mod vmm;

pub use error::LoaderError;
