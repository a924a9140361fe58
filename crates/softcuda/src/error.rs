//! The crate's one error enum. The driver half of softcuda reports errors as `CUresult` codes (the C
//! ABI is its error type); this enum covers the loader, whose callers are Rust.

use std::path::PathBuf;

use crate::loader::{DriverKind, Preference};

/// Why [`crate::loader::select`] could not make a libcuda the process's driver.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// `GPUHOST_DRIVER` holds something other than `auto`, `nvidia` or `softcuda`.
    #[error(
        "GPUHOST_DRIVER={value:?} is not understood: set it to `auto`, `nvidia` or `softcuda` (or unset it for `auto`)"
    )]
    BadPreference {
        /// The value found in the environment.
        value: String,
    },
    /// NVIDIA's driver was required but no candidate library name opened.
    #[error(
        "NVIDIA's libcuda was required (GPUHOST_DRIVER=nvidia) but none of {tried:?} could be opened: install the NVIDIA driver or put its folder on LD_LIBRARY_PATH, or use GPUHOST_DRIVER=softcuda"
    )]
    NvidiaNotFound {
        /// The library names tried, in order.
        tried: Vec<String>,
    },
    /// NVIDIA's driver was required but `libcuda.so` resolves to softcuda.
    #[error(
        "NVIDIA's libcuda was required but `{name}` resolves to softcuda ({path}): remove softcuda's libcuda.so from LD_LIBRARY_PATH, or use GPUHOST_DRIVER=softcuda"
    )]
    NvidiaIsSoftcuda {
        /// The library name that was opened.
        name: String,
        /// Where that name led.
        path: PathBuf,
    },
    /// `$SOFTCUDA_LIB` names something that is not a file.
    #[error("SOFTCUDA_LIB={path:?} is not a file: point it at a built libsoftcuda.so or unset it")]
    SoftLibEnvMissing {
        /// The value of `SOFTCUDA_LIB`.
        path: PathBuf,
    },
    /// No `libsoftcuda.so` in any of the places searched.
    #[error(
        "libsoftcuda.so was not found in {searched:?}: build the softcuda crate (cargo builds it beside binaries that depend on it) or set SOFTCUDA_LIB to its path"
    )]
    SoftLibNotFound {
        /// The files looked for, in order.
        searched: Vec<PathBuf>,
    },
    /// `dlopen` refused the softcuda library.
    #[error(
        "could not open {path}: {source}; rebuild softcuda or point SOFTCUDA_LIB at a working libsoftcuda.so"
    )]
    SoftOpenFailed {
        /// The file that was opened.
        path: PathBuf,
        /// What the dynamic loader said.
        #[source]
        source: libloading::Error,
    },
    /// The file opened as softcuda does not export softcuda's marker symbol.
    #[error(
        "{path} opened but is not softcuda (no `softcuda_abi_version` symbol): point SOFTCUDA_LIB at libsoftcuda.so"
    )]
    NotSoftcuda {
        /// The file that was opened.
        path: PathBuf,
    },
    /// softcuda is loaded, but a bare `dlopen("libcuda.so")` would reach a different library, so
    /// cudarc would not use softcuda.
    #[error(
        "softcuda was loaded from {soft} but `libcuda.so` still resolves to {other}: another libcuda is already loaded in this process; select the driver before anything else touches CUDA"
    )]
    Shadowed {
        /// softcuda's path.
        soft: PathBuf,
        /// What `libcuda.so` resolves to instead.
        other: PathBuf,
    },
    /// A driver was already selected for this process and it does not satisfy the new request.
    #[error(
        "the {chosen:?} driver is already selected for this process and cannot be swapped for {requested:?}: choose the driver once, before any CUDA call (GPUHOST_DRIVER)"
    )]
    AlreadySelected {
        /// The driver in use.
        chosen: DriverKind,
        /// What was asked for now.
        requested: Preference,
    },
}
