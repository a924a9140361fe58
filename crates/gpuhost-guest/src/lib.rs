//! Guest SDK for WebAssembly components (target `wasm32-wasip2`) that launch GPU kernels
//! through the `gpuhost:cuda@0.1.0` imports.
//!
//! The raw bindings are generated from `wit/` (the one source of truth) and re-exported as
//! [`raw`]; [`DeviceBuffer`] and [`Launch`] are thin typed helpers over them.
//!
//! ```no_run
//! use gpuhost_guest::{DeviceBuffer, Launch, Module, Stream};
//! # fn main() -> gpuhost_guest::Result<()> {
//! # const PTX: &str = "";
//! let module = Module::from_ptx(PTX)?; // include_str!("saxpy.ptx") in a real guest
//! let saxpy = module.kernel("saxpy")?;
//! let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0])?;
//! let y = DeviceBuffer::from_slice(&[10.0f32, 20.0, 30.0])?;
//! let stream = Stream::create()?;
//! Launch::new(&saxpy).grid1(1).block1(32).scalar(2.0f32).buffer(&x).buffer(&y).scalar(3u32)
//!     .enqueue(&stream)?;
//! stream.synchronize()?;
//! assert_eq!(y.download()?, [12.0, 24.0, 36.0]);
//!
//! // The same launch bound once and enqueued again: y = 2x + y, twice more.
//! let again = Launch::new(&saxpy).grid1(1).block1(32).scalar(2.0f32).buffer(&x).buffer(&y)
//!     .scalar(3u32).bind()?;
//! stream.enqueue(&again)?;
//! stream.enqueue(&again)?;
//! stream.synchronize()?;
//! assert_eq!(y.download()?, [16.0, 32.0, 48.0]);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod bindings;
mod buffer;
#[cfg(feature = "http")]
pub mod http;
mod launch;
mod launch_abi;
mod pod;
mod read;

pub use bindings::gpuhost::cuda as raw;
/// The stream intrinsics wit-bindgen generated (`<u8 as StreamPayload>::VTABLE`), for tests that
/// hand the host raw pointers.
#[doc(hidden)]
pub use bindings::wit_stream;
pub use buffer::DeviceBuffer;
pub use launch::{Launch, Scalar};
pub use pod::Pod;
pub use raw::bundle::{get_kernel as bundle_kernel, kernel_names as bundle_kernel_names};
pub use raw::device::{DeviceInfo, MemoryInfo, QuotaInfo, info as device_info, quotas};
pub use raw::memory::Buffer;
pub use raw::module::{Kernel, Module, ParamInfo};
pub use raw::stream::{Arg, BoundLaunch, BufferArg, Event, LaunchConfig, Stream};
pub use raw::types::{Dim3, Error};

/// The result of every fallible gpuhost:cuda call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
