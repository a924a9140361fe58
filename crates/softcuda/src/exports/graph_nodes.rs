//! The graph entry points for nodes built by hand beyond kernels and fills (a part of
//! [`super`]'s list kept apart for size): memory nodes and the device's graph-memory figures,
//! child graphs and clones, memcpy nodes. Thin shims over `graph`, `graph_mem` and `graph_copy`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUcontext, CUdevice, CUdeviceptr, CUresult};

use super::graph::{Exec, Graph, Node, add, node_list};
use super::handle_value;
use super::pool_calls::{RawPoolProps, raw_pool_props, read_pool_props};
use crate::abi::{self, CuResult, p};
use crate::graph::{self, NodeKind};
use crate::graph_copy::{self, RawMemcpy3D};
use crate::vmm::RawAccessDesc;
use crate::{context, graph_mem, pool};

/// `CUDA_MEM_ALLOC_NODE_PARAMS` (v1 and v2 share the layout) with its pool properties read
/// through [`RawPoolProps`].
#[repr(C)]
pub struct RawMemAllocNodeParams {
    /// Where the memory is (a device) and what it is (pinned, no IPC handles).
    pub pool_props: RawPoolProps,
    /// Other devices' access to the allocation.
    pub access_descs: *const RawAccessDesc,
    /// Entries in `access_descs`.
    pub access_desc_count: usize,
    /// Bytes to allocate.
    pub bytesize: usize,
    /// Out: the allocation's address.
    pub dptr: CUdeviceptr,
}

/// Reads a mem-alloc node's parameters and makes its allocation in the current context.
///
/// # Safety
/// `params` is non-null and points to a readable `CUDA_MEM_ALLOC_NODE_PARAMS` whose
/// `accessDescs` holds `accessDescCount` entries.
unsafe fn alloc_for_node(
    params: *const RawMemAllocNodeParams,
) -> CuResult<Arc<graph_mem::GraphAlloc>> {
    // SAFETY: `params` is readable (caller contract); fields are read through raw places.
    let (props, descs, count, bytes) = unsafe {
        (
            read_pool_props(&raw const (*params).pool_props)?,
            (&raw const (*params).access_descs).read(),
            (&raw const (*params).access_desc_count).read(),
            (&raw const (*params).bytesize).read(),
        )
    };
    pool::check_props(&props)?;
    let access: Vec<RawAccessDesc> = match count {
        0 => Vec::new(),
        _ if descs.is_null() => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        // SAFETY: non-null and holding `count` descriptors (caller contract).
        n => unsafe { std::slice::from_raw_parts(descs, n) }.to_vec(),
    };
    let checked: Vec<pool::Access> = access
        .iter()
        .map(|d| pool::Access {
            location_type: d.location.kind,
            device: d.location.id,
            flags: d.flags,
        })
        .collect();
    pool::check_access(props.location_id, &checked)?;
    let ctx = context::live()?;
    graph_mem::alloc(&ctx, props, access, abi::bytes(bytes))
}

/// Reads the `CUDA_MEMCPY3D` of a memcpy node and checks it; a non-NULL context must be live.
///
/// # Safety
/// `params` is null or points to a readable `CUDA_MEMCPY3D`.
unsafe fn read_copy(params: *const RawMemcpy3D, ctx: CUcontext) -> CuResult<RawMemcpy3D> {
    // SAFETY: NULL (refused) or readable (caller contract); every field is a plain integer.
    let copy = unsafe { abi::read(params) }?;
    if !ctx.is_null() {
        context::resolve(handle_value(ctx))?;
    }
    graph_copy::check(&copy)?;
    Ok(copy)
}

exports! {
    /// A mem-alloc node: the allocation is made now and its address written to
    /// `nodeParams->dptr`; it stays at that address for the graph's life.
    fn cuGraphAddMemAllocNode(phGraphNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, nodeParams: *mut RawMemAllocNodeParams) {
        if nodeParams.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null (checked) and a readable CUDA_MEM_ALLOC_NODE_PARAMS (cuda.h).
        let owner = unsafe { alloc_for_node(nodeParams) }?;
        let addr = owner.addr;
        // SAFETY: `phGraphNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h):
        // add's contract. On failure `owner` is dropped and the memory freed.
        unsafe { add(phGraphNode, hGraph, deps, n, || Ok(NodeKind::MemAlloc(owner))) }?;
        // SAFETY: non-null (checked) and writable: `dptr` is the struct's out field (cuda.h).
        unsafe { (&raw mut (*nodeParams).dptr).write(addr) };
        Ok(())
    }

    /// A mem-alloc node's parameters; `accessDescs` points into the node (valid while it lives).
    fn cuGraphMemAllocNodeGetParams(hNode: Node, params_out: *mut RawMemAllocNodeParams) {
        let NodeKind::MemAlloc(a) = graph::kind_of(handle_value(hNode))? else {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        };
        let out = RawMemAllocNodeParams {
            pool_props: raw_pool_props(&a.props),
            access_descs: if a.access.is_empty() { std::ptr::null() } else { a.access.as_ptr() },
            access_desc_count: a.access.len(),
            bytesize: usize::try_from(a.len).unwrap_or(usize::MAX),
            dptr: a.addr,
        };
        // SAFETY: `params_out` is NULL (refused) or writable (cuda.h).
        unsafe { abi::write(params_out, out) }
    }

    /// A mem-free node for a graph allocation no graph frees yet.
    fn cuGraphAddMemFreeNode(phGraphNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, dptr: CUdeviceptr) {
        let owner = graph_mem::to_free(dptr)?;
        let held = Arc::clone(&owner);
        // SAFETY: `phGraphNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h):
        // add's contract.
        unsafe { add(phGraphNode, hGraph, deps, n, || Ok(NodeKind::MemFree(held))) }?;
        graph_mem::mark_freed(&owner);
        Ok(())
    }

    /// The address a mem-free node frees.
    fn cuGraphMemFreeNodeGetParams(hNode: Node, dptr_out: *mut CUdeviceptr) {
        let NodeKind::MemFree(a) = graph::kind_of(handle_value(hNode))? else {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        };
        // SAFETY: `dptr_out` is NULL (refused) or writable (cuda.h).
        unsafe { abi::write(dptr_out, a.addr) }
    }

    /// A `CUgraphMem_attribute` of the device (a `cuuint64_t`).
    fn cuDeviceGetGraphMemAttribute(device: CUdevice, attr: c_uint, value: *mut c_void) {
        let v = graph_mem::attribute(device, attr)?;
        // SAFETY: `value` is NULL (refused) or points to the attribute's `cuuint64_t` (cuda.h).
        unsafe { abi::write(value.cast::<u64>(), v) }
    }

    /// Resets a high watermark (the value must be 0).
    fn cuDeviceSetGraphMemAttribute(device: CUdevice, attr: c_uint, value: *mut c_void) {
        // SAFETY: `value` is NULL (refused) or points to the attribute's `cuuint64_t` (cuda.h).
        let v = unsafe { abi::read(value.cast::<u64>()) }?;
        graph_mem::set_attribute(device, attr, v)
    }

    /// Gives cached graph memory back (softcuda caches none).
    fn cuDeviceGraphMemTrim(device: CUdevice) { graph_mem::trim(device) }

    /// A node that runs a clone of `childGraph`.
    fn cuGraphAddChildGraphNode(phGraphNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, childGraph: Graph) {
        if phGraphNode.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `deps` is NULL or holds `n` handles (cuda.h): node_list's contract.
        let deps = unsafe { node_list(deps, n) }?;
        let node = graph::add_child(handle_value(hGraph), &deps, handle_value(childGraph))?;
        // SAFETY: non-null (checked) and writable (cuda.h).
        unsafe { abi::write(phGraphNode, p(node)) }
    }

    /// The graph a child-graph node owns (not a copy: changes to it change the node).
    fn cuGraphChildGraphNodeGetGraph(hNode: Node, phGraph: *mut Graph) {
        let child = graph::child_graph(handle_value(hNode))?;
        // SAFETY: `phGraph` is NULL (refused) or writable (cuda.h).
        unsafe { abi::write(phGraph, p(child)) }
    }

    /// Gives an executable graph's child-graph node the work of `childGraph`'s nodes (same
    /// shape) for later launches.
    fn cuGraphExecChildGraphNodeSetParams(hGraphExec: Exec, hNode: Node, childGraph: Graph) {
        graph::exec_set_child(handle_value(hGraphExec), handle_value(hNode), handle_value(childGraph))
    }

    /// A copy of a graph (not of one with memory nodes).
    fn cuGraphClone(phGraphClone: *mut Graph, originalGraph: Graph) {
        if phGraphClone.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let copy = graph::clone_graph(handle_value(originalGraph))?;
        // SAFETY: non-null (checked) and writable (cuda.h).
        unsafe { abi::write(phGraphClone, p(copy)) }
    }

    /// A memcpy node: linear memory (host, device, unified; pitched rows and slices); CUDA
    /// arrays are `CUDA_ERROR_NOT_SUPPORTED`.
    fn cuGraphAddMemcpyNode(phGraphNode: *mut Node, hGraph: Graph, deps: *const Node, n: usize, copyParams: *const RawMemcpy3D, ctx: CUcontext) {
        // SAFETY: `copyParams` is NULL or a readable CUDA_MEMCPY3D (cuda.h): read_copy's contract.
        let copy = unsafe { read_copy(copyParams, ctx) }?;
        // SAFETY: `phGraphNode` is NULL or writable and `deps` NULL or `n` handles (cuda.h):
        // add's contract.
        unsafe { add(phGraphNode, hGraph, deps, n, || Ok(NodeKind::Memcpy(copy))) }
    }

    /// A memcpy node's parameters (as given, or as the captured copy made them).
    fn cuGraphMemcpyNodeGetParams(hNode: Node, nodeParams: *mut RawMemcpy3D) {
        let NodeKind::Memcpy(copy) = graph::kind_of(handle_value(hNode))? else {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        };
        // SAFETY: `nodeParams` is NULL (refused) or writable (cuda.h).
        unsafe { abi::write(nodeParams, copy) }
    }

    /// Replaces a memcpy node's copy in the graph.
    fn cuGraphMemcpyNodeSetParams(hNode: Node, nodeParams: *const RawMemcpy3D) {
        // SAFETY: `nodeParams` is NULL or a readable CUDA_MEMCPY3D (cuda.h): read_copy's contract.
        let copy = unsafe { read_copy(nodeParams, std::ptr::null_mut()) }?;
        graph::set_params(handle_value(hNode), NodeKind::Memcpy(copy))
    }

    /// Replaces a one-dimensional memcpy node's copy in an executable graph (by another
    /// one-dimensional copy) for later launches.
    fn cuGraphExecMemcpyNodeSetParams(hGraphExec: Exec, hNode: Node, copyParams: *const RawMemcpy3D, ctx: CUcontext) {
        // SAFETY: `copyParams` is NULL or a readable CUDA_MEMCPY3D (cuda.h): read_copy's contract.
        let copy = unsafe { read_copy(copyParams, ctx) }?;
        graph::exec_set_memcpy(handle_value(hGraphExec), handle_value(hNode), copy)
    }
}
