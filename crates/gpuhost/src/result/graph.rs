//! CUDA graphs of kernel nodes: cuGraph*.

use std::ptr;

use cudarc::driver::sys::{
    self, CUDA_KERNEL_NODE_PARAMS, CUgraph, CUgraphExec, CUgraphNode, CUstream,
};

use super::{DriverResult, ok};

/// cuGraphCreate: an empty graph.
///
/// # Safety
/// The caller's context is bound; the caller destroys the graph once.
pub(crate) unsafe fn create() -> DriverResult<CUgraph> {
    let mut graph: CUgraph = ptr::null_mut();
    // SAFETY: valid out pointer; context and ownership as the caller promises (above).
    ok("cuGraphCreate", unsafe {
        sys::cuGraphCreate(&mut graph, 0)
    })?;
    Ok(graph)
}

/// cuGraphAddKernelNode_v2: a kernel node after `dep` (none: a root).
///
/// # Safety
/// `graph` and `dep` are live in the bound context, `dep` a node of `graph`; `params` holds
/// one pointer per kernel parameter, alive for the call (the driver copies them).
pub(crate) unsafe fn add_kernel_node(
    graph: CUgraph,
    dep: Option<CUgraphNode>,
    params: &CUDA_KERNEL_NODE_PARAMS,
) -> DriverResult<CUgraphNode> {
    let mut node: CUgraphNode = ptr::null_mut();
    let deps = dep
        .as_ref()
        .map_or(ptr::null(), |d| d as *const CUgraphNode);
    // SAFETY: `deps` points at `dep` (alive for the call) or is null with a count of 0; the
    // rest as the caller promises (above).
    ok("cuGraphAddKernelNode", unsafe {
        sys::cuGraphAddKernelNode_v2(&mut node, graph, deps, usize::from(dep.is_some()), params)
    })?;
    Ok(node)
}

/// cuGraphInstantiateWithFlags (no flags).
///
/// # Safety
/// `graph` is complete and live in the bound context; the caller destroys the executable
/// graph once.
pub(crate) unsafe fn instantiate(graph: CUgraph) -> DriverResult<CUgraphExec> {
    let mut exec: CUgraphExec = ptr::null_mut();
    // SAFETY: valid out pointer; the graph as the caller promises (above).
    ok("cuGraphInstantiateWithFlags", unsafe {
        sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
    })?;
    Ok(exec)
}

/// cuGraphExecKernelNodeSetParams_v2: new arguments for one kernel node of `exec`.
///
/// # Safety
/// `exec` and `node` belong to one graph, live in the bound context; `params` holds one
/// pointer per kernel parameter, alive for the call (the driver copies them).
pub(crate) unsafe fn set_kernel_node_params(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: &CUDA_KERNEL_NODE_PARAMS,
) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuGraphExecKernelNodeSetParams", unsafe {
        sys::cuGraphExecKernelNodeSetParams_v2(exec, node, params)
    })
}

/// cuGraphLaunch: runs `exec` on `stream`.
///
/// # Safety
/// Both belong to the bound context; everything the graph's kernels touch stays alive until
/// it has run.
pub(crate) unsafe fn launch(exec: CUgraphExec, stream: CUstream) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuGraphLaunch", unsafe { sys::cuGraphLaunch(exec, stream) })
}

/// cuGraphExecDestroy.
///
/// # Safety
/// `exec` is the caller's, of the bound context, destroyed once.
pub(crate) unsafe fn destroy_exec(exec: CUgraphExec) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuGraphExecDestroy", unsafe {
        sys::cuGraphExecDestroy(exec)
    })
}

/// cuGraphDestroy.
///
/// # Safety
/// `graph` is the caller's, of the bound context, destroyed once (after its executable graph).
pub(crate) unsafe fn destroy(graph: CUgraph) -> DriverResult {
    // SAFETY: forwarded to the caller (above).
    ok("cuGraphDestroy", unsafe { sys::cuGraphDestroy(graph) })
}
