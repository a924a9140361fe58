//! The one error type of gpuhost: variants by cause, each message telling the user what to do.

use std::path::PathBuf;

/// Result with gpuhost's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gpuhost, by cause.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver could be loaded (no NVIDIA libcuda and no softcuda, or the driver failed to
    /// initialise). Not cached: the next call tries again.
    #[error(
        "no CUDA driver: {reason} (install the NVIDIA driver, or set GPUHOST_DRIVER=softcuda with libsoftcuda.so built)"
    )]
    NoDriver {
        /// Why no driver was usable.
        reason: String,
    },
    /// The driver loaded but has no device with that ordinal.
    #[error("no CUDA device with ordinal {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The primary context was torn down under the host (foreign reset or an extra release). The
    /// host has re-retained it as `generation`; handles of older generations are dead: load the
    /// registry again, allocate buffers again.
    #[error(
        "the CUDA context was lost and re-created (now generation {generation}): handles from an older generation are invalid; reload registries and reallocate buffers"
    )]
    ContextLost {
        /// The host's generation now.
        generation: u64,
    },
    /// A sticky driver error (illegal address, launch failure, ...) poisoned the device: every
    /// later call fails, for the rest of the process. NVIDIA's driver does not recover it in
    /// process (a primary-context reset does not help: the next retain returns the same error;
    /// seen on an H200, driver 580), so the process must exit and be restarted.
    #[error(
        "the CUDA device is poisoned by a sticky error {name} (from {call}): a kernel faulted (e.g. an out-of-bounds or misaligned access); the driver cannot recover it in this process, so every later GPU call fails: restart the process, and fix the kernel or its arguments"
    )]
    ContextPoisoned {
        /// The driver call that reported it.
        call: &'static str,
        /// The CUresult name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS.
        name: String,
    },
    /// A registry cannot be released while others hold it or its kernels.
    #[error("registry '{registry}' is still held by {count} holder(s): {}; drop them (or wait for those requests) and release again", holders.join(", "))]
    HandlesOutstanding {
        /// The registry's name.
        registry: String,
        /// How many holders.
        count: usize,
        /// Who: kernel name and the label given when the handle was taken, or "other `Arc<Registry>` handles".
        holders: Vec<String>,
    },
    /// A module image failed to load; `log` is the driver's JIT error log.
    #[error("module '{module}' ({}) failed to load: {log}", file.as_ref().map(|f| f.display().to_string()).unwrap_or_else(|| "in memory".into()))]
    InvalidModule {
        /// The module's name in the bundle.
        module: String,
        /// The file it came from, if any.
        file: Option<PathBuf>,
        /// The driver's JIT log (or the cause when there is none).
        log: String,
    },
    /// A bundle directory or its manifest.toml is unreadable or malformed.
    #[error("bundle {path}: {reason}")]
    InvalidBundle {
        /// The bundle directory or file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// No kernel of that name in the registry.
    #[error("no kernel '{name}' in registry '{registry}'; kernels there: {}", available.join(", "))]
    KernelNotFound {
        /// The name asked for.
        name: String,
        /// The registry's name.
        registry: String,
        /// The kernel names that exist.
        available: Vec<String>,
    },
    /// Launch dimensions or shared memory exceed the device's limits, or are zero.
    #[error("invalid launch of '{kernel}': {reason}")]
    InvalidLaunch {
        /// The kernel.
        kernel: String,
        /// What exceeds which limit.
        reason: String,
    },
    /// The arguments do not match the kernel's parameter list.
    #[error("arguments do not match kernel '{kernel}': {reason}")]
    ArgMismatch {
        /// The kernel.
        kernel: String,
        /// Which argument and how.
        reason: String,
    },
    /// A handle of one device's host was used with another device's host.
    #[error(
        "{what} belongs to device {found} but was used on device {expected}: use handles of one device together"
    )]
    DeviceMismatch {
        /// What was mismatched (kernel, buffer, event).
        what: &'static str,
        /// The device ordinal of the stream/host in use.
        expected: usize,
        /// The device ordinal the handle belongs to.
        found: usize,
    },
    /// A buffer access out of the buffer's bounds.
    #[error("buffer access out of bounds: offset {offset} + length {len} > buffer size {size}")]
    OutOfBounds {
        /// Start of the access.
        offset: usize,
        /// Length of the access.
        len: usize,
        /// The buffer's size.
        size: usize,
    },
    /// An arena allocation does not fit in what the arena has free.
    #[error(
        "the arena cannot hold {requested} more bytes: its limit is {limit} bytes, {used} are in live allocations and the largest free range is {largest_free} bytes; drop buffers you no longer need, or create the arena with a larger max_bytes"
    )]
    ArenaFull {
        /// Bytes asked for.
        requested: u64,
        /// Bytes in live allocations of the arena.
        used: u64,
        /// The arena's limit (its max_bytes, rounded up to 256).
        limit: u64,
        /// The largest free range.
        largest_free: u64,
    },
    /// The driver or device lacks something a feature needs.
    #[error(
        "{feature} are not available here: {reason}; use a driver and GPU with CUDA virtual memory management (CUDA 10.2+, Pascal or newer) or softcuda"
    )]
    Unsupported {
        /// What cannot be used.
        feature: &'static str,
        /// What is missing.
        reason: String,
    },
    /// A range of a [`HostBuffer`](crate::HostBuffer) that is reversed or runs past its end.
    #[error(
        "host buffer range {start}..{end} does not fit a {size}-byte host buffer: give an ascending range inside it"
    )]
    HostRange {
        /// Start of the range.
        start: usize,
        /// End of the range (exclusive).
        end: usize,
        /// The host buffer's size.
        size: usize,
    },
    /// Host memory for a page-locked buffer could not be allocated.
    #[error("cannot allocate {bytes} bytes of page-locked host memory ({reason}): ask for less")]
    HostMemory {
        /// The size asked for.
        bytes: usize,
        /// Why not.
        reason: String,
    },
    /// A transfer configuration out of its bounds.
    #[error("invalid transfer configuration: {reason}")]
    TransferConfig {
        /// Which setting, and its bounds.
        reason: String,
    },
    /// Any other driver error.
    #[error("CUDA driver call {call} failed: {name} ({})", *.code as u32)]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The CUresult: match on it, not on `name`.
        code: cudarc::driver::sys::CUresult,
        /// The CUresult's name (and context), for people.
        name: String,
    },
}

impl Error {
    /// True for errors that mean the context is gone (the caller should reload).
    pub fn is_context_lost(&self) -> bool {
        matches!(self, Error::ContextLost { .. })
    }
}
