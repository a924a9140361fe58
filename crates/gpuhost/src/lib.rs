//! gpuhost: a process-scoped CUDA host for Rust services.
//!
//! One [`Host`] per device holds the device's primary context for the process (exactly one
//! retain), binds it on every entry from any thread, and detects a context torn down under it
//! (a foreign reset or an extra release): handles of the old context generation then refuse
//! with [`Error::ContextLost`]. A kernel fault is different: it poisons the device for the rest
//! of the process ([`Error::ContextPoisoned`] from then on; no reset recovers it on NVIDIA's
//! driver), so a service should exit and be restarted. Kernels come from [`Registry`]s (the
//! modules of one model), released only when nothing holds them; a [`ModelSlot`] swaps models
//! under load. Launches are checked, enqueued, and complete through a [`Completion`] future woken
//! by a per-host completion thread. For untrusted kernels, an [`Arena`] is one fixed virtual
//! range of zeroed buffers that never move (what a PTX sandbox fences accesses into), and a
//! [`ControlBlock`] a few bytes of host-mapped memory kernels and the host share.
//!
//! ```no_run
//! # fn main() -> gpuhost::Result<()> {
//! let host = gpuhost::host(0)?;
//! let reg = gpuhost::Registry::load(&host, "bundles/model-a")?;
//! let out = host.alloc(4 * 256)?;
//! let k = reg.kernel_labeled("stamp", "req-1")?;
//! let stream = host.stream()?;
//! let done = stream.launch(&k, gpuhost::LaunchConfig::for_elements(256, 128),
//!     &[gpuhost::Arg::Buffer(&out, 0), gpuhost::Arg::U32(256)])?;
//! done.wait()?; // or `.await`
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod alloc_cache;
mod arena;
mod buffer;
mod completion;
mod control;
mod control_pool;
mod copy;
mod deferred;
mod device_alloc;
mod driver;
mod error;
mod facts;
mod graph;
mod host;
mod launch;
mod locked;
mod manifest;
mod module;
mod pinned;
pub mod ptx_sig;
mod registry;
mod release;
mod result;
mod slot;
mod stats;
mod stream;
mod transfer;

pub use alloc_cache::DEFAULT_LIMIT as DEFAULT_ALLOC_CACHE_LIMIT;
pub use arena::{ARENA_ALIGN, Arena, ArenaReset, Zeroing};
pub use buffer::{DeviceBuffer, WeakBuffer};
pub use completion::{Completion, CompletionObserver, MAX_AWAIT_SPIN};
pub use control::{
    CONTROL_BYTES, ControlBlock, DEVICE_WINDOW, START_COUNTER_OFFSET, START_COUNTERS,
    START_TIME_OFFSET,
};
pub use driver::{DriverInfo, DriverKind, INCOMPLETE_DRIVER, device_count, driver};
pub use error::{Error, Result};
pub use facts::{DeviceFacts, MemInfo};
pub use graph::{GraphLaunch, KernelGraph};
pub use host::{Host, host};
pub use launch::{Arg, LaunchConfig, ParamInfo};
pub use locked::LockedMemory;
pub use manifest::{ModuleImage, ModuleSource, read_bundle};
pub use pinned::HostBuffer;
pub use registry::{Kernel, ParamSource, Registry};
pub use release::{ReleaseRefused, ReleaseReport, release};
pub use slot::{ModelLease, ModelSlot, Retired, SwapReport};
pub use stats::HostStats;
pub use stream::{Event, Stream};
pub use transfer::{DrainedDownload, TransferConfig};

/// cudarc's raw driver bindings, re-exported for benchmarks and tests that compare with (or
/// deliberately disturb) the raw driver API.
pub use cudarc::driver::sys;
