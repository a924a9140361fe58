//! The crate's one error type: why a conformance run could not produce a verdict, or why its
//! verdict is "different from the reference".

use std::path::PathBuf;

use cudarc::driver::{DriverError, sys::CUresult};

/// Everything that can go wrong while preparing, running or checking a conformance case.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A driver call returned something other than `CUDA_SUCCESS`.
    #[error(
        "{call} failed with {code:?}; the driver under test ({driver}) rejected a call the test expects to succeed"
    )]
    Driver {
        /// The driver entry point, e.g. `cuMemAlloc`.
        call: &'static str,
        /// The raw result code.
        code: CUresult,
        /// Which driver runs ("softcuda" or "nvidia").
        driver: String,
    },
    /// No driver could be selected for this process.
    #[error(
        "no CUDA driver could be selected: {reason}; build softcuda (cargo build -p softcuda) or install NVIDIA's driver"
    )]
    NoDriver {
        /// The loader's explanation.
        reason: String,
    },
    /// A corpus fixture could not be read.
    #[error(
        "cannot read corpus fixture {path}: {source}; regenerate with corpus/gen-clang.sh or scripts/gen-corpus-nvcc.sh"
    )]
    Fixture {
        /// The file that failed.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// A corpus table entry is inconsistent with itself (a bug in this crate's table).
    #[error("corpus case `{case}` is malformed: {detail}; fix its entry in conformance::cases")]
    BadCase {
        /// The case name.
        case: String,
        /// What is wrong.
        detail: String,
    },
    /// The kernel's output differs from the CPU reference.
    #[error("`{case}` ({flavour} PTX) output `{buffer}` differs from the CPU reference: {detail}")]
    Mismatch {
        /// The case name.
        case: String,
        /// Which PTX flavour ran.
        flavour: String,
        /// Which output buffer differed.
        buffer: String,
        /// First mismatches and counts.
        detail: String,
    },
}

impl Error {
    /// Wraps a cudarc driver error with the entry point that produced it.
    pub fn driver(call: &'static str, err: DriverError) -> Error {
        Error::Driver {
            call,
            code: err.0,
            driver: crate::driver::driver_name(),
        }
    }

    /// The driver result code, when this error came from the driver.
    pub fn code(&self) -> Option<CUresult> {
        match self {
            Error::Driver { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
