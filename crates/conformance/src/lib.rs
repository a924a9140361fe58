//! Conformance: the same tests, run on softcuda and on NVIDIA's driver, hold both to one
//! behaviour. This library holds what the tests share: a seeded input generator, CPU references
//! and tolerances for every kernel of `corpus/`, and a thin harness over cudarc's `driver::result`
//! layer (safe types owning one driver handle each, releasing it on drop).
//!
//! Call [`driver::env`] first: it runs `softcuda::loader::select` before any cudarc call.
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
pub mod stream;

pub use error::{Error, Result};
