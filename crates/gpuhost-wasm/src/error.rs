//! Errors: [`Error`] for the embedder (loading and running guests), [`CudaError`] for one
//! gpuhost:cuda call (a WIT error the guest sees, or a trap for a host bug), and the mapping of
//! gpuhost's errors onto the WIT cases.

use crate::bindings::WitError;

/// What can go wrong loading or running a guest, by cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The guest file could not be read.
    #[error("cannot read guest {path}: {source} (check the path)")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are a core WebAssembly module, not a component.
    #[error(
        "{what} is a core WebAssembly module, not a component: build the guest for wasm32-wasip2 (cargo build --target wasm32-wasip2) or wrap it with `wasm-tools component new`"
    )]
    NotAComponent {
        /// The file or a description of the bytes.
        what: String,
    },
    /// The bytes are not WebAssembly at all, or failed validation/compilation.
    #[error("{what} is not a valid WebAssembly component: {reason}")]
    InvalidComponent {
        /// The file or a description of the bytes.
        what: String,
        /// wasmtime's reason.
        reason: String,
    },
    /// The guest imports something this host does not provide.
    #[error(
        "the guest imports something this host does not provide: {reason} (gpuhost provides wasi:cli/command@0.2 and gpuhost:cuda@0.1.0)"
    )]
    MissingImport {
        /// wasmtime's description of the unsatisfied import.
        reason: String,
    },
    /// The guest does not export `wasi:cli/run`, so there is nothing to run.
    #[error(
        "the guest does not export wasi:cli/run: {reason} (build it as a program with `fn main`, target wasm32-wasip2)"
    )]
    NotACommand {
        /// wasmtime's reason.
        reason: String,
    },
    /// The guest trapped (a panic, an unreachable, out of fuel, a host bug, ...).
    #[error("the guest trapped: {reason}")]
    Trap {
        /// The trap and its backtrace as wasmtime reports it.
        reason: String,
        /// True when it ran out of fuel (the CPU quota).
        out_of_fuel: bool,
    },
    /// A bundle to grant sandboxed guests has a module the sandbox cannot confine.
    #[error("bundle module `{module}` cannot be granted to sandboxed guests: {reason}")]
    BundleNotConfinable {
        /// The module's name in the manifest.
        module: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The wasmtime engine could not be configured.
    #[error("wasmtime engine setup failed: {0}")]
    Engine(String),
    /// The GPU runtime failed outside any guest call (e.g. no driver).
    #[error(transparent)]
    Gpu(#[from] gpuhost::Error),
}

/// The outcome of one gpuhost:cuda call that failed: either a WIT error the guest receives as a
/// value, or a trap. Traps are only for host bugs (e.g. a resource of the wrong type in the
/// table), never for guest mistakes.
#[derive(Debug)]
pub enum CudaError {
    /// Returned to the guest as `gpuhost:cuda/types.error`.
    Guest(WitError),
    /// Traps the guest.
    Trap(wasmtime::Error),
}

impl From<WitError> for CudaError {
    fn from(e: WitError) -> Self {
        CudaError::Guest(e)
    }
}

impl From<wasmtime::component::ResourceTableError> for CudaError {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        CudaError::Trap(e.into())
    }
}

impl From<gpuhost::Error> for CudaError {
    fn from(e: gpuhost::Error) -> Self {
        CudaError::Guest(from_gpu(&e))
    }
}

/// Shorthand for a gpuhost:cuda call's result.
pub type CudaResult<T> = Result<T, CudaError>;

/// The WIT case for a gpuhost error, carrying gpuhost's message (which says what to do).
pub fn from_gpu(e: &gpuhost::Error) -> WitError {
    use gpuhost::Error as G;
    let msg = e.to_string();
    match e {
        G::ContextLost { .. } => WitError::ContextLost(msg),
        G::ContextPoisoned { .. } => WitError::DeviceFault(msg),
        G::InvalidModule { .. } => WitError::InvalidModule(msg),
        G::InvalidBundle { .. } => WitError::InvalidModule(msg),
        G::KernelNotFound { .. } => WitError::KernelNotFound(msg),
        G::InvalidLaunch { .. } => WitError::InvalidLaunch(msg),
        G::ArgMismatch { .. } => WitError::ArgMismatch(msg),
        G::OutOfBounds { .. } => WitError::OutOfBounds(msg),
        G::DeviceMismatch { .. } => WitError::InvalidHandle(msg),
        G::ArenaFull { .. } => WitError::OutOfMemory(msg),
        G::Unsupported { .. } => WitError::NotSupported(msg),
        G::Driver { code, .. } => {
            use gpuhost::sys::CUresult as R;
            match code {
                R::CUDA_ERROR_OUT_OF_MEMORY => WitError::OutOfMemory(msg),
                R::CUDA_ERROR_NOT_SUPPORTED => WitError::NotSupported(msg),
                R::CUDA_ERROR_NOT_READY => WitError::NotReady(msg),
                R::CUDA_ERROR_INVALID_IMAGE | R::CUDA_ERROR_NO_BINARY_FOR_GPU => {
                    WitError::InvalidModule(msg)
                }
                R::CUDA_ERROR_ILLEGAL_ADDRESS
                | R::CUDA_ERROR_LAUNCH_FAILED
                | R::CUDA_ERROR_ILLEGAL_INSTRUCTION
                | R::CUDA_ERROR_MISALIGNED_ADDRESS
                | R::CUDA_ERROR_HARDWARE_STACK_ERROR
                | R::CUDA_ERROR_ASSERT => WitError::DeviceFault(msg),
                _ => WitError::Driver(msg),
            }
        }
        _ => WitError::Driver(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_driver_error_maps_to_its_own_case() {
        let e = gpuhost::Error::Driver {
            call: "cuMemAlloc_v2",
            code: gpuhost::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            name: "a name that is not the code's".into(),
        };
        assert!(matches!(from_gpu(&e), WitError::OutOfMemory(m) if m.contains("cuMemAlloc_v2")));
    }

    #[test]
    fn module_load_failure_names_the_cause() {
        let e = gpuhost::Error::InvalidModule {
            module: "m".into(),
            file: None,
            log: "line 3: syntax".into(),
        };
        assert!(matches!(from_gpu(&e), WitError::InvalidModule(m) if m.contains("line 3: syntax")));
    }

    #[test]
    fn sticky_fault_maps_to_device_fault() {
        let e = gpuhost::Error::ContextPoisoned {
            call: "cuStreamSynchronize",
            name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        };
        assert!(matches!(from_gpu(&e), WitError::DeviceFault(_)));
    }
}
