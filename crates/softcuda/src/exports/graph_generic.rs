//! The generic graph-node entry points of CUDA 12.2 (a part of [`super`]'s list kept apart for
//! size): cuGraphAddNode(_v2), cuGraphNodeSetParams and cuGraphExecNodeSetParams take a
//! `CUgraphNodeParams`, a node type and a union of the per-type structs. Each call hands the
//! union's member to the per-type export (cuGraphAddKernelNode_v2, cuGraphAddMemsetNode, …), so
//! there is one implementation of each node type. Types softcuda has no node for (external
//! semaphores, batch memory operations, conditional nodes), and a child graph moved into its
//! node, are `CUDA_ERROR_NOT_SUPPORTED`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::c_void;

use cudarc::driver::sys::{
    CUDA_MEMCPY_NODE_PARAMS, CUDA_MEMSET_NODE_PARAMS_v2, CUevent, CUgraphEdgeData,
    CUgraphNodeParams, CUresult,
};

use super::graph::{Exec, Graph, Node};
use super::graph_edit::default_edges;
use super::handle_value;
use super::{graph as g, graph_nodes as gn};
use crate::abi::CuResult;
use crate::graph;

/// The last `CUgraphNodeType` (conditional nodes).
const TYPE_CONDITIONAL: u32 = 13;
/// `CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE`: the node owns a clone (the only kind softcuda has).
const OWNERSHIP_CLONE: u32 = 0;

/// A per-type export's answer as a result.
fn ok(r: CUresult) -> CuResult<()> {
    match r {
        CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(e),
    }
}

/// The node type and a pointer to the union member of `params`.
///
/// # Safety
/// `params` is null or points to a readable `CUgraphNodeParams`.
unsafe fn split(params: *mut CUgraphNodeParams) -> CuResult<(u32, *mut c_void)> {
    if params.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null and readable (caller contract); the type is read as the C enum's u32,
    // never as the Rust enum (a value outside it would be undefined behaviour).
    let kind = unsafe { (&raw const (*params).type_).cast::<u32>().read() };
    // SAFETY: a place projection inside the struct the caller passed; nothing is read.
    let body = unsafe { (&raw mut (*params).__bindgen_anon_1).cast::<c_void>() };
    Ok((kind, body))
}

/// The answer for a node type with no per-type path here: NOT_SUPPORTED for the types softcuda
/// lacks, INVALID_VALUE for a value that is no `CUgraphNodeType`.
fn unsupported(kind: u32) -> CuResult<()> {
    match kind {
        0..=TYPE_CONDITIONAL => Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// cuGraphAddNode's body: adds the node its parameters describe through the per-type export.
///
/// # Safety
/// `out` is null or writable, `deps` null or valid for `n` handles, `params` null or a
/// readable and writable `CUgraphNodeParams` whose member of its type follows that node
/// type's contract.
unsafe fn add_node(
    out: *mut Node,
    hGraph: Graph,
    deps: *const Node,
    n: usize,
    params: *mut CUgraphNodeParams,
) -> CuResult<()> {
    // SAFETY: forwarded caller contract.
    let (kind, body) = unsafe { split(params) }?;
    // SAFETY: for each type, `body` is the union member of that type (caller contract), which
    // the per-type export reads (and, for an allocation, writes `dptr` back to, as cuda.h says
    // cuGraphAddNode does); `out` and `deps` are forwarded unchanged.
    let r = unsafe {
        match kind {
            graph::TYPE_KERNEL => g::cuGraphAddKernelNode_v2(out, hGraph, deps, n, body.cast()),
            graph::TYPE_MEMCPY => {
                let m = body.cast::<CUDA_MEMCPY_NODE_PARAMS>();
                let ctx = (&raw const (*m).copyCtx).read();
                gn::cuGraphAddMemcpyNode(
                    out,
                    hGraph,
                    deps,
                    n,
                    (&raw const (*m).copyParams).cast(),
                    ctx,
                )
            }
            graph::TYPE_MEMSET => {
                let m = body.cast::<CUDA_MEMSET_NODE_PARAMS_v2>();
                // The v1 struct is the v2 struct's prefix; v2 adds the context.
                g::cuGraphAddMemsetNode(
                    out,
                    hGraph,
                    deps,
                    n,
                    m.cast(),
                    (&raw const (*m).ctx).read(),
                )
            }
            graph::TYPE_HOST => g::cuGraphAddHostNode(out, hGraph, deps, n, body.cast()),
            graph::TYPE_GRAPH => {
                // CUDA_CHILD_GRAPH_NODE_PARAMS: the graph, then (CUDA 12.9) its ownership.
                let child = body.cast::<Graph>().read();
                if body
                    .cast::<u8>()
                    .add(size_of::<Graph>())
                    .cast::<u32>()
                    .read()
                    != OWNERSHIP_CLONE
                {
                    return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
                }
                gn::cuGraphAddChildGraphNode(out, hGraph, deps, n, child)
            }
            graph::TYPE_EMPTY => g::cuGraphAddEmptyNode(out, hGraph, deps, n),
            graph::TYPE_WAIT_EVENT => {
                g::cuGraphAddEventWaitNode(out, hGraph, deps, n, body.cast::<CUevent>().read())
            }
            graph::TYPE_EVENT_RECORD => {
                g::cuGraphAddEventRecordNode(out, hGraph, deps, n, body.cast::<CUevent>().read())
            }
            graph::TYPE_MEM_ALLOC => gn::cuGraphAddMemAllocNode(out, hGraph, deps, n, body.cast()),
            graph::TYPE_MEM_FREE => {
                gn::cuGraphAddMemFreeNode(out, hGraph, deps, n, body.cast::<u64>().read())
            }
            other => return unsupported(other),
        }
    };
    ok(r)
}

exports! {
    /// A node of any type softcuda has, described by a `CUgraphNodeParams` (CUDA 12.2).
    fn cuGraphAddNode(phGraphNode: *mut Node, hGraph: Graph, dependencies: *const Node, numDependencies: usize, nodeParams: *mut CUgraphNodeParams) {
        // SAFETY: the pointers are as cuda.h documents: add_node's contract.
        unsafe { add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams) }
    }

    /// [`cuGraphAddNode`] with edge data for its dependencies (CUDA 12.3): default edges only.
    fn cuGraphAddNode_v2(phGraphNode: *mut Node, hGraph: Graph, dependencies: *const Node, dependencyData: *const CUgraphEdgeData, numDependencies: usize, nodeParams: *mut CUgraphNodeParams) {
        // SAFETY: `dependencyData` is NULL or holds `numDependencies` entries (cuda.h).
        unsafe { default_edges(dependencyData, numDependencies) }?;
        // SAFETY: the pointers are as cuda.h documents: add_node's contract.
        unsafe { add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams) }
    }

    /// Replaces a graph node's work by work of the same type: kernel and memcpy nodes (the
    /// types with a per-type setter); other types are NOT_SUPPORTED.
    fn cuGraphNodeSetParams(hNode: Node, nodeParams: *mut CUgraphNodeParams) {
        // SAFETY: `nodeParams` is NULL or a readable CUgraphNodeParams (cuda.h).
        let (kind, body) = unsafe { split(nodeParams) }?;
        if graph::node_type(handle_value(hNode))? != kind {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `body` is the union member of the node's type (cuda.h), which the per-type
        // export reads.
        let r = unsafe {
            match kind {
                graph::TYPE_KERNEL => g::cuGraphKernelNodeSetParams_v2(hNode, body.cast()),
                graph::TYPE_MEMCPY => {
                    let m = body.cast::<CUDA_MEMCPY_NODE_PARAMS>();
                    gn::cuGraphMemcpyNodeSetParams(hNode, (&raw const (*m).copyParams).cast())
                }
                other => return unsupported(other),
            }
        };
        ok(r)
    }

    /// Replaces an executable graph node's work for later launches: kernel, memcpy and
    /// child-graph nodes (the types with a per-type setter); other types are NOT_SUPPORTED.
    fn cuGraphExecNodeSetParams(hGraphExec: Exec, hNode: Node, nodeParams: *mut CUgraphNodeParams) {
        // SAFETY: `nodeParams` is NULL or a readable CUgraphNodeParams (cuda.h).
        let (kind, body) = unsafe { split(nodeParams) }?;
        // SAFETY: `body` is the union member of the node's type (cuda.h), which the per-type
        // export reads.
        let r = unsafe {
            match kind {
                graph::TYPE_KERNEL => g::cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, body.cast()),
                graph::TYPE_MEMCPY => {
                    let m = body.cast::<CUDA_MEMCPY_NODE_PARAMS>();
                    let ctx = (&raw const (*m).copyCtx).read();
                    gn::cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, (&raw const (*m).copyParams).cast(), ctx)
                }
                graph::TYPE_GRAPH => gn::cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, body.cast::<Graph>().read()),
                other => return unsupported(other),
            }
        };
        ok(r)
    }
}
