//! The one error type of gpuhost-serve, by cause; each message says what to do.

use std::path::PathBuf;

/// What can go wrong setting up the server or loading a function.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The repository folder could not be read.
    #[error(
        "cannot read the repository {path}: {source} (pass an existing folder to --repository)"
    )]
    Repository {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No function of that name is in the repository.
    #[error(
        "no function `{name}` in the repository (a function is a folder holding function.wasm; POST /v2/repository/index lists them)"
    )]
    UnknownFunction {
        /// The name asked for.
        name: String,
    },
    /// A function's files could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// function.toml does not parse or holds a bad value.
    #[error("{path} is invalid: {reason}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, and how to fix it.
        reason: String,
    },
    /// function.wasm is not a component of the http-function world.
    #[error("function `{function}`: {source}")]
    Component {
        /// The function.
        function: String,
        /// gpuhost-wasm's reason (not a component, invalid, a missing import, ...).
        source: gpuhost_wasm::Error,
    },
    /// function.wasm imports something the server does not provide.
    #[error(
        "function `{function}` imports something gpuhost serve does not provide: {reason} (it provides WASI p2, wasi:http@0.2 and gpuhost:cuda@0.1.0)"
    )]
    MissingImport {
        /// The function.
        function: String,
        /// wasmtime's description of the unsatisfied import.
        reason: String,
    },
    /// function.wasm does not export wasi:http/incoming-handler.
    #[error(
        "function `{function}` does not export wasi:http/incoming-handler@0.2: {reason} (build it for the gpuhost:cuda/http-function world, e.g. with gpuhost-guest's `http` feature)"
    )]
    NotAnHttpFunction {
        /// The function.
        function: String,
        /// wasmtime's reason.
        reason: String,
    },
    /// The function's bundle did not load on a device.
    #[error("function `{function}`: its bundle did not load on device {device}: {source}")]
    Bundle {
        /// The function.
        function: String,
        /// The device ordinal.
        device: usize,
        /// gpuhost's reason (manifest, PTX or cubin error).
        source: gpuhost::Error,
    },
    /// The bundle of a sandboxed function could not be rewritten or loaded on a device.
    #[error(
        "function `{function}` (sandboxed): its bundle did not load on device {device}: {source}"
    )]
    SandboxedBundle {
        /// The function.
        function: String,
        /// The device ordinal.
        device: usize,
        /// gpuhost-wasm's reason (no PTX, refused by the sandbox, manifest or load error).
        source: gpuhost_wasm::Error,
    },
    /// A CUDA context loss left the function's version with dead device code, and reloading it
    /// failed (it is tried again at most once per `retry_ms`, by a request or readiness probe).
    #[error(
        "function `{function}` lost its device code to a CUDA context loss, and reloading it failed: {reason} (retried at most every {retry_ms} ms: fix the function's folder, or POST /v2/repository/models/{function}/load)"
    )]
    RecoveryFailed {
        /// The function.
        function: String,
        /// Why the last reload failed.
        reason: String,
        /// How long after a failed reload the next is tried.
        retry_ms: u64,
    },
    /// A device could not be opened.
    #[error("device {device} cannot be used: {source} (check `gpuhost doctor` and --devices)")]
    Device {
        /// The ordinal.
        device: usize,
        /// gpuhost's reason.
        source: gpuhost::Error,
    },
    /// The driver reports no device, or --devices named none.
    #[error("no device to serve on (see `gpuhost doctor`; softcuda always has one)")]
    NoDevices,
    /// A server option has a value the server cannot serve with.
    #[error("the server option {option} {reason}")]
    InvalidOption {
        /// The option, as `ServeOptions` and the CLI name it.
        option: &'static str,
        /// What its value must be.
        reason: String,
    },
    /// The wasmtime engine could not be set up.
    #[error("wasmtime engine setup failed: {0}")]
    Engine(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
