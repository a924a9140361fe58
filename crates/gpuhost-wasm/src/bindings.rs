//! Host bindings generated from `wit/` by wasmtime's `bindgen!`; nothing here is hand-written
//! but the configuration: which imports are async (those that await the GPU: `synchronize` and
//! the buffer transfers, `read-after`, `reading.wait`) and which Rust types back the WIT
//! resources.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "gpuhost:cuda/imports",
    imports: {
        "gpuhost:cuda/stream.[method]stream.synchronize": async | trappable,
        "gpuhost:cuda/stream.[method]stream.read-after": async | trappable,
        "gpuhost:cuda/memory.[method]buffer.write": async | trappable,
        "gpuhost:cuda/memory.[method]buffer.read": async | trappable,
        "gpuhost:cuda/memory.[method]buffer.fill": async | trappable,
        "gpuhost:cuda/memory.[method]reading.wait": async | trappable,
        "gpuhost:cuda/memory.[method]buffer.copy-from": async | trappable,
        default: trappable,
    },
    trappable_error_type: {
        "gpuhost:cuda/types.error" => crate::error::CudaError,
    },
    with: {
        "gpuhost:cuda/module.module": crate::module::ModuleRes,
        "gpuhost:cuda/module.kernel": crate::module::KernelRes,
        "gpuhost:cuda/memory.buffer": crate::memory::BufferRes,
        "gpuhost:cuda/memory.reading": crate::stream_read::ReadingRes,
        "gpuhost:cuda/stream.stream": crate::stream::StreamRes,
        "gpuhost:cuda/stream.event": crate::event::EventRes,
        "gpuhost:cuda/stream.bound-launch": crate::bound_launch::BoundLaunchRes,
    },
    require_store_data_send: true,
});

pub use self::gpuhost::cuda::types::Error as WitError;
