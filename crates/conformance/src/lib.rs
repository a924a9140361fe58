//! Conformance: the same tests, run on softcuda and on NVIDIA's driver, hold both to one
//! behaviour. This library holds what the tests share: a seeded input generator, CPU references
//! and tolerances for every kernel of `corpus/`, and a thin harness over cudarc's `driver::result`
//! layer (safe types owning one driver handle each, releasing it on drop).
//!
//! Call [`driver::env`] first: it runs `softcuda::loader::select` before any cudarc call.
//!
//! Environment:
//! - `GPUHOST_DRIVER` = `auto` | `nvidia` | `softcuda` picks the driver. Unset/`auto` with no
//!   driver at all prints `skipped: no driver`; an explicit choice that fails to load fails.
//! - `CONFORMANCE_SEED=<u64>` replays the inputs of a failed run (every report prints its seed).
//! - `CONFORMANCE_CORPUS=<dir>` points at `corpus/` when the test binary runs outside cargo
//!   (otherwise `CARGO_MANIFEST_DIR/../../corpus`, then `./corpus`).
//!
//! On a real GPU run the tests one at a time: `cargo test -p conformance -- --test-threads=1`.
#![deny(missing_docs)]

pub mod case;
pub mod cases;
pub mod compare;
pub mod context;
pub mod copy;
pub mod corpus;
pub mod driver;
pub mod error;
pub mod memory;
pub mod module;
pub mod rng;
pub mod run;
pub mod sandboxed;
pub mod stream;

pub use error::{Error, Result};
