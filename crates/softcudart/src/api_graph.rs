//! Exported entry points for stream capture and graphs: a stream's work captured into a graph
//! (`cudaStreamBeginCapture` … `cudaStreamEndCapture`), graphs built node by node, instantiated
//! and launched. A `cudaGraph_t`, `cudaGraphNode_t` and `cudaGraphExec_t` are the driver's
//! `CUgraph`, `CUgraphNode` and `CUgraphExec`, and capture modes and statuses have the driver's
//! values, as in NVIDIA's runtime; kernels named by host stub become the current context's
//! `CUfunction` (the runtime's `cudaKernelNodeParams` becomes `CUDA_KERNEL_NODE_PARAMS`).
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it; NULL out-pointers
//! are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::context;
use crate::driver::{Handle, KernelNodeParams};
use crate::launch::Dim3;
use crate::registry;
use crate::status::{Rt, api, check, code};

/// Runs one driver call in the current context.
fn in_context(call: impl FnOnce(&crate::driver::Driver) -> c_int) -> Result<(), Rt> {
    let d = context::current()?;
    check(call(d))
}

/// Starts capturing `stream`'s work (`mode`: global 0, thread-local 1, relaxed 2).
pub(crate) unsafe extern "C" fn cudaStreamBeginCapture(stream: Handle, mode: c_int) -> c_int {
    // SAFETY: plain values; the driver checks the stream and the mode.
    api(|| in_context(|d| unsafe { (d.cuStreamBeginCapture_v2)(stream, mode) }))
}

/// Ends the capture begun on `stream`, giving its graph; a failure sets the graph to NULL, as
/// NVIDIA's runtime does (H200, scripts/probes/capture-instantiate.cu; its driver leaves it).
pub(crate) unsafe extern "C" fn cudaStreamEndCapture(stream: Handle, graph: *mut Handle) -> c_int {
    // SAFETY: `graph` is NULL or valid (the contract above); the closure's pointer is valid.
    let r = api(|| unsafe {
        context::create(graph, std::ptr::null_mut(), |d, g| {
            (d.cuStreamEndCapture)(stream, g)
        })
    });
    if r != 0 && !graph.is_null() {
        // SAFETY: non-NULL, so valid for writing a handle (the contract above).
        unsafe { graph.write_unaligned(std::ptr::null_mut()) };
    }
    r
}

/// Whether `stream` is capturing (`cudaStreamCaptureStatus`: none 0, active 1, invalidated 2).
pub(crate) unsafe extern "C" fn cudaStreamIsCapturing(stream: Handle, status: *mut c_int) -> c_int {
    // SAFETY: `status` is NULL or valid (the contract above); the closure's pointer is valid.
    api(|| unsafe { context::create(status, 0, |d, s| (d.cuStreamIsCapturing)(stream, s)) })
}

/// A capturing stream's status, capture id, graph so far, and the nodes its next work will
/// depend on (with their edge data, `cudaGraphEdgeData` being the driver's `CUgraphEdgeData`):
/// CUDA 13's signature, the driver's `cuStreamGetCaptureInfo_v3`. Every out-pointer but the
/// status may be NULL; the dependency array is the driver's, valid until the capture changes.
pub(crate) unsafe extern "C" fn cudaStreamGetCaptureInfo(
    stream: Handle,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut Handle,
    deps: *mut *const Handle,
    edges: *mut *const c_void,
    count: *mut usize,
) -> c_int {
    api(|| {
        if status.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: each pointer is NULL or valid for its write (the contract above); the driver
        // checks the stream.
        in_context(|d| unsafe {
            (d.cuStreamGetCaptureInfo_v3)(stream, status, id, graph, deps, edges, count)
        })
    })
}

/// Creates an empty graph (`flags` must be 0).
pub(crate) unsafe extern "C" fn cudaGraphCreate(graph: *mut Handle, flags: c_uint) -> c_int {
    // SAFETY: `graph` is NULL or valid (the contract above); the closure's pointer is valid.
    api(|| unsafe {
        context::create(graph, std::ptr::null_mut(), |d, g| {
            (d.cuGraphCreate)(g, flags)
        })
    })
}

/// The runtime's `struct cudaKernelNodeParams`.
#[repr(C)]
pub(crate) struct RuntimeKernelNodeParams {
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    shared: c_uint,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

// Measured from CUDA 13.0's driver_types.h and cuda.h with a C compiler.
const _: () = assert!(std::mem::size_of::<RuntimeKernelNodeParams>() == 56);
const _: () = assert!(std::mem::size_of::<KernelNodeParams>() == 72);

/// The driver's form of the runtime's kernel node `params`: the host stub becomes its kernel's
/// function in the current context (a stub never registered is what a launch of it answers).
///
/// # Safety
/// `params` is NULL or points to a `cudaKernelNodeParams`.
unsafe fn driver_params(params: *const RuntimeKernelNodeParams) -> Result<KernelNodeParams, Rt> {
    if params.is_null() {
        return Err(code::INVALID_VALUE);
    }
    // SAFETY: non-NULL, so a `cudaKernelNodeParams` (the caller's contract).
    let p = unsafe { params.read_unaligned() };
    let kernel = registry::find_kernel(p.func)?;
    let d = context::current()?;
    let mut func: Handle = std::ptr::null_mut();
    // SAFETY: `func` is a valid out-pointer; the driver checks the kernel; a context is current.
    check(unsafe { (d.cuKernelGetFunction)(&mut func, kernel) })?;
    Ok(KernelNodeParams {
        func,
        grid: [p.grid.x, p.grid.y, p.grid.z],
        block: [p.block.x, p.block.y, p.block.z],
        shared: p.shared,
        params: p.params,
        extra: p.extra,
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    })
}

/// Adds a kernel node after `count` dependencies (the driver copies the arguments now).
pub(crate) unsafe extern "C" fn cudaGraphAddKernelNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    params: *const RuntimeKernelNodeParams,
) -> c_int {
    api(|| {
        if node.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: the contract above.
        let p = unsafe { driver_params(params) }?;
        // SAFETY: `node` is valid (the contract above), `p` lives across the call; the driver
        // checks the graph and reads `count` dependencies (the C API's contract).
        unsafe {
            context::create(node, std::ptr::null_mut(), |d, n| {
                (d.cuGraphAddKernelNode_v2)(n, graph, deps, count, &p)
            })
        }
    })
}

/// Changes a kernel node's launch in an instantiated graph (the graph itself keeps its own).
pub(crate) unsafe extern "C" fn cudaGraphExecKernelNodeSetParams(
    exec: Handle,
    node: Handle,
    params: *const RuntimeKernelNodeParams,
) -> c_int {
    api(|| {
        // SAFETY: the contract above.
        let p = unsafe { driver_params(params) }?;
        // SAFETY: `p` lives across the call; the driver checks the handles.
        in_context(|d| unsafe { (d.cuGraphExecKernelNodeSetParams_v2)(exec, node, &p) })
    })
}

/// Instantiates `graph` (`cudaGraphInstantiateFlag*`, the driver's values).
fn instantiate(exec: *mut Handle, graph: Handle, flags: u64) -> Result<(), Rt> {
    // SAFETY: `exec` is NULL or valid (the contract above); the closure's pointer is valid.
    unsafe {
        context::create(exec, std::ptr::null_mut(), |d, e| {
            (d.cuGraphInstantiateWithFlags)(e, graph, flags)
        })
    }
}

/// Instantiates a graph: CUDA 12's signature, with flags in place of the error node and log.
pub(crate) unsafe extern "C" fn cudaGraphInstantiate(
    exec: *mut Handle,
    graph: Handle,
    flags: u64,
) -> c_int {
    api(|| instantiate(exec, graph, flags))
}

/// Instantiates a graph with flags.
pub(crate) unsafe extern "C" fn cudaGraphInstantiateWithFlags(
    exec: *mut Handle,
    graph: Handle,
    flags: u64,
) -> c_int {
    api(|| instantiate(exec, graph, flags))
}

/// Launches an instantiated graph on `stream`.
pub(crate) unsafe extern "C" fn cudaGraphLaunch(exec: Handle, stream: Handle) -> c_int {
    // SAFETY: the driver checks the handles.
    api(|| in_context(|d| unsafe { (d.cuGraphLaunch)(exec, stream) }))
}

/// Prepares an instantiated graph's first launch on `stream` ahead of it.
pub(crate) unsafe extern "C" fn cudaGraphUpload(exec: Handle, stream: Handle) -> c_int {
    // SAFETY: the driver checks the handles.
    api(|| in_context(|d| unsafe { (d.cuGraphUpload)(exec, stream) }))
}

/// Swaps this thread's capture mode with `*mode` (the old one is written back).
pub(crate) unsafe extern "C" fn cudaThreadExchangeStreamCaptureMode(mode: *mut c_int) -> c_int {
    api(|| {
        if mode.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = crate::driver::driver()?;
        // SAFETY: `mode` is valid for reading and writing (the contract above); the driver
        // checks the mode.
        check(unsafe { (d.cuThreadExchangeStreamCaptureMode)(mode) })
    })
}

/// Destroys an instantiated graph (launches already queued still run).
pub(crate) unsafe extern "C" fn cudaGraphExecDestroy(exec: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| in_context(|d| unsafe { (d.cuGraphExecDestroy)(exec) }))
}

/// Destroys a graph.
pub(crate) unsafe extern "C" fn cudaGraphDestroy(graph: Handle) -> c_int {
    // SAFETY: the driver checks the handle.
    api(|| in_context(|d| unsafe { (d.cuGraphDestroy)(graph) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_node_params_of_a_stub_never_registered_are_refused_without_touching_the_driver() {
        let p = RuntimeKernelNodeParams {
            func: 0x40 as *const c_void,
            grid: Dim3 { x: 1, y: 1, z: 1 },
            block: Dim3 { x: 1, y: 1, z: 1 },
            shared: 0,
            params: std::ptr::null_mut(),
            extra: std::ptr::null_mut(),
        };
        // SAFETY: a live struct; NULL.
        unsafe {
            assert_eq!(driver_params(&p).err(), Some(code::INVALID_RESOURCE_HANDLE));
            assert_eq!(
                driver_params(std::ptr::null()).err(),
                Some(code::INVALID_VALUE)
            );
        }
    }
}
