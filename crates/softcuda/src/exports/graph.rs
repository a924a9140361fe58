//! The graph and stream-capture entry points (a part of [`super`]'s list kept apart for size):
//! thin shims over `graph` and `capture`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::cell::Cell;
use std::ffi::{c_char, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{
    CUDA_HOST_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS, CUDA_MEMSET_NODE_PARAMS, CUcontext, CUevent,
    CUgraphEdgeData, CUresult, CUstream,
};

use super::handle_value;
use crate::abi::{self, CuResult, p};
use crate::graph::{self, NodeKind};
use crate::launch::{self, Packed};
use crate::{capture, copy, stream};

/// Opaque graph, node and executable-graph handles as C passes them.
pub(super) type Graph = *mut c_void;
pub(super) type Node = *mut c_void;
pub(super) type Exec = *mut c_void;

/// A C array of `n` node handles (NULL with `n == 0` is an empty list).
///
/// # Safety
/// `nodes` is null or valid for reading `n` handles.
pub(super) unsafe fn node_list(nodes: *const Node, n: usize) -> CuResult<Vec<u64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if nodes.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null and valid for `n` entries (caller contract).
    Ok(unsafe { std::slice::from_raw_parts(nodes, n) }
        .iter()
        .map(|&x| handle_value(x))
        .collect())
}

/// Reads a `CUDA_KERNEL_NODE_PARAMS` (the `_v2` layout adds `kern` and `ctx` after the fields
/// both share) and packs its launch.
///
/// # Safety
/// `params` is null or readable as the struct of its version; its parameter pointers follow
/// cuLaunchKernel's contract.
unsafe fn kernel_params(params: *const CUDA_KERNEL_NODE_PARAMS, v2: bool) -> CuResult<Packed> {
    if params.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: readable (caller contract); fields read through raw places; `kern` and `ctx`
    // only for _v2.
    unsafe {
        let func = handle_value((&raw const (*params).func).read());
        // A library kernel (CUkernel) as `func` runs in the current context; as `kern` (read
        // only when `func` is NULL) in `ctx`, the current one when NULL. The node keeps the
        // function it resolves to.
        let function = if func != 0 {
            crate::library::resolve(func, None)?
        } else if v2 && !(&raw const (*params).kern).read().is_null() {
            let kern = handle_value((&raw const (*params).kern).read());
            match handle_value((&raw const (*params).ctx).read()) {
                0 => crate::library::resolve(kern, None)?,
                c => crate::library::resolve(kern, Some(&*crate::context::resolve(c)?))?,
            }
        } else {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        };
        let f = crate::module::get_function(function)?;
        launch::prepare(
            &f,
            function,
            [
                (&raw const (*params).gridDimX).read(),
                (&raw const (*params).gridDimY).read(),
                (&raw const (*params).gridDimZ).read(),
            ],
            [
                (&raw const (*params).blockDimX).read(),
                (&raw const (*params).blockDimY).read(),
                (&raw const (*params).blockDimZ).read(),
            ],
            (&raw const (*params).sharedMemBytes).read(),
            (&raw const (*params).kernelParams).read(),
            (&raw const (*params).extra).read(),
        )
    }
}

/// Adds a node and writes its handle.
///
/// # Safety
/// `out` is null or writable; `deps` is null or valid for `n` handles.
pub(super) unsafe fn add(
    out: *mut Node,
    graph: Graph,
    deps: *const Node,
    n: usize,
    kind: impl FnOnce() -> CuResult<NodeKind>,
) -> CuResult<()> {
    if out.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: forwarded caller contract.
    let deps = unsafe { node_list(deps, n) }?;
    let node = graph::add_node(handle_value(graph), &deps, kind()?)?;
    // SAFETY: non-null and writable (caller contract).
    unsafe { abi::write(out, p(node)) }
}

thread_local! {
    /// This thread's stream-capture interaction mode (cuThreadExchangeStreamCaptureMode).
    static CAPTURE_MODE: Cell<u32> = const { Cell::new(0) };
}

exports! {
    /// An empty graph; `flags` must be 0.
    fn cuGraphCreate(phGraph: *mut Graph, flags: c_uint) {
        if phGraph.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phGraph` is cuGraphCreate's out-pointer: NULL (refused) or writable per cuda.h.
        unsafe { abi::write(phGraph, p(graph::create(flags)?)) }
    }

    /// Destroys a graph (executable graphs made from it stay valid).
    fn cuGraphDestroy(hGraph: Graph) { graph::destroy(handle_value(hGraph)) }

    /// A kernel node (CUDA 10 struct layout).
    fn cuGraphAddKernelNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `phNode` is NULL or writable, `deps` NULL or `n` handles, and `params` NULL or
        // the kernel node struct of this layout (cuda.h): the contracts of add and kernel_params.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::Kernel(kernel_params(params, false)?))) }
    }

    /// A kernel node (CUDA 12 struct layout, with `kern` and `ctx`).
    fn cuGraphAddKernelNode_v2(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `phNode` is NULL or writable, `deps` NULL or `n` handles, and `params` NULL or
        // the kernel node struct of this layout (cuda.h): the contracts of add and kernel_params.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::Kernel(kernel_params(params, true)?))) }
    }

    /// Replaces a graph kernel node's launch (CUDA 10 layout).
    fn cuGraphKernelNodeSetParams(hNode: Node, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `params` is NULL or the kernel node struct of this layout (cuda.h):
        // kernel_params's contract.
        let packed = unsafe { kernel_params(params, false) }?;
        graph::set_params(handle_value(hNode), NodeKind::Kernel(packed))
    }

    /// Replaces a graph kernel node's launch (CUDA 12 layout).
    fn cuGraphKernelNodeSetParams_v2(hNode: Node, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `params` is NULL or the kernel node struct of this layout (cuda.h):
        // kernel_params's contract.
        let packed = unsafe { kernel_params(params, true) }?;
        graph::set_params(handle_value(hNode), NodeKind::Kernel(packed))
    }

    /// Replaces a kernel node's launch in an executable graph (CUDA 10 layout).
    fn cuGraphExecKernelNodeSetParams(hExec: Exec, hNode: Node, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `params` is NULL or the kernel node struct of this layout (cuda.h):
        // kernel_params's contract.
        let packed = unsafe { kernel_params(params, false) }?;
        graph::exec_set_kernel_params(handle_value(hExec), handle_value(hNode), packed)
    }

    /// Replaces a kernel node's launch in an executable graph (CUDA 12 layout).
    fn cuGraphExecKernelNodeSetParams_v2(hExec: Exec, hNode: Node, params: *const CUDA_KERNEL_NODE_PARAMS) {
        // SAFETY: `params` is NULL or the kernel node struct of this layout (cuda.h):
        // kernel_params's contract.
        let packed = unsafe { kernel_params(params, true) }?;
        graph::exec_set_kernel_params(handle_value(hExec), handle_value(hNode), packed)
    }

    /// A node that only orders others.
    fn cuGraphAddEmptyNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize) {
        // SAFETY: `phNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h): add's
        // contract.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::Empty)) }
    }

    /// A memset node: `height` rows of `width` elements of 1, 2 or 4 bytes, `pitch` apart.
    fn cuGraphAddMemsetNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, params: *const CUDA_MEMSET_NODE_PARAMS, ctx: CUcontext) {
        if params.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        if !ctx.is_null() {
            crate::context::resolve(handle_value(ctx))?;
        }
        // SAFETY: non-null (checked above) and a readable CUDA_MEMSET_NODE_PARAMS (cuda.h).
        let m = unsafe { params.read() };
        let elem = m.elementSize as usize;
        if !matches!(elem, 1 | 2 | 4) || (m.height > 1 && m.pitch < m.width * elem) {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let replay = move |s| {
            for row in 0..m.height {
                copy::fill(m.dst + (row * m.pitch) as u64, m.value, elem, m.width, Some(s))?;
            }
            Ok(())
        };
        // SAFETY: `phNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h): add's
        // contract.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::Call(Arc::new(replay), graph::TYPE_MEMSET))) }
    }

    /// A host-function node.
    fn cuGraphAddHostNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, params: *const CUDA_HOST_NODE_PARAMS) {
        if params.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked above) and a readable CUDA_HOST_NODE_PARAMS (cuda.h), read
        // field by field through raw places.
        let (f, data) = unsafe { ((&raw const (*params).fn_).read(), (&raw const (*params).userData).read()) };
        let (f, data) = (f.ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?, data.expose_provenance());
        let replay = move |s| stream::host_func(s, f, data);
        // SAFETY: `phNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h): add's
        // contract.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::Call(Arc::new(replay), graph::TYPE_HOST))) }
    }

    /// A node recording `event`.
    fn cuGraphAddEventRecordNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, event: CUevent) {
        crate::event::get(handle_value(event))?;
        // SAFETY: `phNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h): add's
        // contract.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::EventRecord(handle_value(event)))) }
    }

    /// A node waiting for `event`.
    fn cuGraphAddEventWaitNode(phNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, event: CUevent) {
        crate::event::get(handle_value(event))?;
        // SAFETY: `phNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h): add's
        // contract.
        unsafe { add(phNode, hGraph, deps, n, || Ok(NodeKind::EventWait(handle_value(event)))) }
    }

    /// Edges `from[i]` → `to[i]`.
    fn cuGraphAddDependencies(hGraph: Graph, from: *const Node, to: *const Node, n: usize) {
        // SAFETY: `from` and `to` are NULL or hold `n` handles each (cuda.h): node_list's contract.
        let (from, to) = unsafe { (node_list(from, n)?, node_list(to, n)?) };
        graph::add_dependencies(handle_value(hGraph), &from, &to)
    }

    /// [`cuGraphAddDependencies`] with edge data (CUDA 12.3): default edges only (NULL or
    /// zeroed data).
    fn cuGraphAddDependencies_v2(hGraph: Graph, from: *const Node, to: *const Node, edgeData: *const CUgraphEdgeData, n: usize) {
        // SAFETY: `edgeData` is NULL or holds `n` entries (cuda.h): default_edges's contract.
        unsafe { super::graph_edit::default_edges(edgeData, n) }?;
        // SAFETY: `from` and `to` are NULL or hold `n` handles each (cuda.h): node_list's contract.
        let (from, to) = unsafe { (node_list(from, n)?, node_list(to, n)?) };
        graph::add_dependencies(handle_value(hGraph), &from, &to)
    }

    /// The graph's nodes: with `nodes` NULL only their number, else up to `*numNodes` of them.
    fn cuGraphGetNodes(hGraph: Graph, nodes: *mut Node, numNodes: *mut usize) {
        if numNodes.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let all = graph::nodes(handle_value(hGraph))?;
        // SAFETY: `numNodes` is non-null (checked above) and readable per cuda.h.
        if !nodes.is_null() && unsafe { numNodes.read() } == 0 {
            // An array with room for no node: NVIDIA's driver 580 answers INVALID_VALUE.
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        if !nodes.is_null() {
            // SAFETY: `numNodes` is non-null (checked above) and `nodes` holds `*numNodes` handles
            // (cuGraphGetNodes's contract); at most that many are written.
            unsafe {
                for (i, &node) in all.iter().take(numNodes.read()).enumerate() {
                    nodes.add(i).write(p(node));
                }
            }
        }
        // SAFETY: `numNodes` is cuGraphGetNodes's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(numNodes, all.len()) }
    }

    /// The node's `CUgraphNodeType`.
    fn cuGraphNodeGetType(hNode: Node, kind: *mut c_uint) {
        // SAFETY: `kind` is cuGraphNodeGetType's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(kind, graph::node_type(handle_value(hNode))?) }
    }

    /// An executable graph; flags: AUTO_FREE_ON_LAUNCH, UPLOAD, USE_NODE_PRIORITY (device
    /// launch is not supported).
    fn cuGraphInstantiateWithFlags(phExec: *mut Exec, hGraph: Graph, flags: u64) {
        if phExec.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phExec` is cuGraphInstantiateWithFlags's out-pointer: NULL (refused) or writable
        // per cuda.h.
        unsafe { abi::write(phExec, p(graph::instantiate(handle_value(hGraph), flags)?)) }
    }

    /// CUDA 11's signature (error node and log buffer, left untouched on success).
    fn cuGraphInstantiate_v2(phExec: *mut Exec, hGraph: Graph, errorNode: *mut Node, log: *mut c_char, logSize: usize) {
        let _ = (errorNode, log, logSize);
        if phExec.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phExec` is cuGraphInstantiate_v2's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(phExec, p(graph::instantiate(handle_value(hGraph), 0)?)) }
    }

    /// Destroys an executable graph (launches already queued still run).
    fn cuGraphExecDestroy(hExec: Exec) { graph::exec_destroy(handle_value(hExec)) }

    /// Queues the executable graph's nodes on the stream.
    fn cuGraphLaunch(hExec: Exec, hStream: CUstream) { graph::launch(handle_value(hExec), handle_value(hStream)) }

    /// Nothing to upload to a CPU device; checks the handles.
    fn cuGraphUpload(hExec: Exec, hStream: CUstream) { graph::upload(handle_value(hExec), handle_value(hStream)) }

    /// Starts capturing work queued on the stream (mode global).
    fn cuStreamBeginCapture(hStream: CUstream) { capture::begin(handle_value(hStream), 0) }

    /// Starts capturing with a `CUstreamCaptureMode`.
    fn cuStreamBeginCapture_v2(hStream: CUstream, mode: c_uint) { capture::begin(handle_value(hStream), mode) }

    /// Ends the capture begun on this stream and returns its graph.
    fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut Graph) {
        if phGraph.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `phGraph` is cuStreamEndCapture's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(phGraph, std::ptr::null_mut()) }?;
        // SAFETY: `phGraph` is cuStreamEndCapture's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(phGraph, p(capture::end(handle_value(hStream))?)) }
    }

    /// Capture status and id (CUDA 10.1 signature).
    fn cuStreamGetCaptureInfo(hStream: CUstream, status: *mut c_uint, id: *mut u64) {
        let (st, cid) = capture::status(handle_value(hStream))?;
        // SAFETY: `status` is cuStreamGetCaptureInfo's out-pointer: NULL (refused) or writable per
        // cuda.h.
        unsafe { abi::write(status, st) }?;
        if !id.is_null() && st != capture::STATUS_NONE {
            // SAFETY: `id` is cuStreamGetCaptureInfo's out-pointer: NULL (refused) or writable per
            // cuda.h.
            unsafe { abi::write(id, cid) }?;
        }
        Ok(())
    }

    /// Capture status, id, the graph being captured into (the one cuStreamEndCapture will
    /// return, built as the capture goes) and the nodes the next captured node will depend on.
    fn cuStreamGetCaptureInfo_v2(hStream: CUstream, status: *mut c_uint, id: *mut u64, graphOut: *mut Graph, deps: *mut *const Node, numDeps: *mut usize) {
        // SAFETY: each pointer is NULL or writable (cuda.h): capture_info's contract.
        unsafe { capture_info(hStream, status, id, graphOut, deps, std::ptr::null_mut(), numDeps) }
    }

    /// [`cuStreamGetCaptureInfo_v2`] with edge data (always NULL: default edges).
    fn cuStreamGetCaptureInfo_v3(hStream: CUstream, status: *mut c_uint, id: *mut u64, graphOut: *mut Graph, deps: *mut *const Node, edges: *mut *const c_void, numDeps: *mut usize) {
        // SAFETY: each pointer is NULL or writable (cuda.h): capture_info's contract.
        unsafe { capture_info(hStream, status, id, graphOut, deps, edges, numDeps) }
    }

    /// Swaps this thread's capture interaction mode.
    fn cuThreadExchangeStreamCaptureMode(mode: *mut c_uint) {
        // SAFETY: `mode` is NULL (refused) or readable and writable (cuda.h).
        let new = unsafe { abi::read(mode) }?;
        if new > 2 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let old = CAPTURE_MODE.with(|m| m.replace(new));
        // SAFETY: `mode` is cuThreadExchangeStreamCaptureMode's out-pointer: NULL (refused) or
        // writable per cuda.h.
        unsafe { abi::write(mode, old) }
    }
}

/// cuStreamGetCaptureInfo_v2/_v3's body; every out-pointer but `status` may be NULL.
///
/// # Safety
/// Each pointer is null or writable.
#[allow(clippy::too_many_arguments)]
unsafe fn capture_info(
    hStream: CUstream,
    status: *mut c_uint,
    id: *mut u64,
    graph_out: *mut Graph,
    deps: *mut *const Node,
    edges: *mut *const c_void,
    num: *mut usize,
) -> CuResult<()> {
    let (st, cid) = capture::status(handle_value(hStream))?;
    let (graph, list, n) =
        capture::progress(handle_value(hStream)).unwrap_or((0, std::ptr::null(), 0));
    // SAFETY: every pointer is written only when non-null (caller contract: writable).
    unsafe {
        abi::write(status, st)?;
        if st != capture::STATUS_NONE {
            if !id.is_null() {
                abi::write(id, cid)?;
            }
            if !graph_out.is_null() {
                abi::write(graph_out, p(graph))?;
            }
            if !deps.is_null() {
                // Node handles are u64 values, laid out as the pointer-sized CUgraphNode.
                abi::write(deps, list.cast::<Node>())?;
            }
            if !edges.is_null() {
                abi::write(edges, std::ptr::null())?;
            }
            if !num.is_null() {
                abi::write(num, n)?;
            }
        }
    }
    Ok(())
}
