//! The wasmtime host for `gpuhost:cuda@0.1.0`: WebAssembly components launch GPU kernels through
//! gpuhost, each guest (Store) isolated and metered.
//!
//! Embedding: put a [`CudaCtx`] and a `ResourceTable` in your Store data, implement
//! [`CudaView`], call [`add_to_linker`]. Or use [`Runtime`], which also wires WASI (the CLI
//! world) and runs a guest's `main` — that is what `gpuhost run` does.
//!
//! Guarantees: a guest mistake returns a `gpuhost:cuda/types.error` value (never a trap, never a
//! panic); handles live in the guest's own table, so they cannot be forged or shared; every size
//! or count a guest controls is capped by [`Limits`]; dropping the Store releases everything the
//! guest held.
#![deny(missing_docs)]

mod arg_list;
mod bindings;
mod blocking;
mod bound_launch;
mod bundle;
mod bundle_rewrite;
mod burst;
mod calls;
mod confine;
mod ctx;
mod device;
mod error;
mod event;
mod guest_memory;
mod image;
mod limits;
mod memory;
mod module;
mod module_cache;
mod pool;
mod runtime;
mod stream;
mod stream_read;
mod watchdog;

pub use bindings::WitError;
pub use bundle_rewrite::BundleRewrite;
pub use calls::{CallObserver, HostCall};
pub use ctx::{CudaCtx, CudaCtxView, CudaView, HasCuda, add_to_linker};
pub use error::{CudaError, Error};
pub use event::EventRes;
pub use guest_memory::{
    DEFAULT_LOCK_BUDGET, DIRECT_MIN, GuestMemoryCreator, GuestMemoryStats, guest_memory_stats,
};
pub use limits::{Limits, Usage};
pub use memory::BufferRes;
pub use module::{KernelRes, ModuleRes};
pub use module_cache::{ModuleCache, ModuleCacheStats};
pub use pool::{MAX_KEPT_MAPPED, MAX_WAIT, SandboxPool};
pub use runtime::{Guest, Output, OutputPipe, RunOptions, RunOutcome, Runtime, precheck};
pub use stream::StreamRes;
pub use stream_read::{MAX_OPEN_READS, ReadingRes};
