//! The graph entry points that edit and query a graph's shape (a part of [`super`]'s list kept
//! apart for size): node and edge removal, and the dependency and edge queries, each in its
//! CUDA 10 form and its CUDA 12.3 `_v2` form with edge data. softcuda's edges are all default
//! edges (zeroed `CUgraphEdgeData`): edge data given in is accepted only when zeroed, edge data
//! asked for is written zeroed. Thin shims over `graph`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use cudarc::driver::sys::{CUgraphEdgeData, CUresult};

use super::graph::{Graph, Node, node_list};
use super::handle_value;
use crate::abi::{self, CuResult, p};
use crate::graph;

/// Checks that `n` entries of edge data given in (NULL: default) are all default edges; other
/// edge types and ports are `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// `data` is null or valid for reading `n` entries.
pub(super) unsafe fn default_edges(data: *const CUgraphEdgeData, n: usize) -> CuResult<()> {
    if data.is_null() || n == 0 {
        return Ok(());
    }
    // SAFETY: non-null and valid for `n` entries (caller contract); the struct is plain bytes.
    let all = unsafe { std::slice::from_raw_parts(data, n) };
    let zeroed = |e: &CUgraphEdgeData| {
        e.from_port == 0 && e.to_port == 0 && e.type_ == 0 && e.reserved == [0; 5]
    };
    if all.iter().all(zeroed) {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_NOT_SUPPORTED)
    }
}

/// Hands out node lists the way the cuGraph*Get* queries do: with every column NULL only the
/// count is written to `*num`; else each column (and `edge_data`, if non-NULL) gets up to `*num`
/// entries, the places beyond the list's end NULL (zeroed), and `*num` becomes how many were
/// written. A NULL count, columns NULL and non-NULL at once, or edge data without columns is
/// `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `num` is null or readable and writable; each non-null column and `edge_data` are valid for
/// writing `*num` entries.
unsafe fn hand_out(
    columns: &[(*mut Node, Vec<u64>)],
    edge_data: *mut CUgraphEdgeData,
    num: *mut usize,
) -> CuResult<()> {
    // SAFETY: `num` is NULL (refused) or readable (caller contract).
    let room = unsafe { abi::read(num) }?;
    let len = columns.first().map_or(0, |(_, list)| list.len());
    let nulls = columns.iter().filter(|(c, _)| c.is_null()).count();
    if nulls == columns.len() {
        if !edge_data.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `num` is non-null (read above) and writable (caller contract).
        return unsafe { abi::write(num, len) };
    }
    if nulls != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    for (column, list) in columns {
        for i in 0..room {
            let node = list.get(i).map_or(std::ptr::null_mut(), |h| p(*h));
            // SAFETY: non-null (checked above) and valid for `room` entries (caller contract).
            unsafe { column.add(i).write(node) };
        }
    }
    if !edge_data.is_null() {
        // SAFETY: non-null and valid for `room` entries (caller contract); all-zero bytes are a
        // valid CUgraphEdgeData (a default edge).
        unsafe { std::ptr::write_bytes(edge_data, 0, room) };
    }
    // SAFETY: `num` is non-null (read above) and writable (caller contract).
    unsafe { abi::write(num, room.min(len)) }
}

exports! {
    /// Removes a node and every edge to or from it (not in a graph with memory nodes).
    fn cuGraphDestroyNode(hNode: Node) { graph::destroy_node(handle_value(hNode)) }

    /// Removes the edges `from[i]` → `to[i]`; each must exist.
    fn cuGraphRemoveDependencies(hGraph: Graph, from: *const Node, to: *const Node, n: usize) {
        // SAFETY: `from` and `to` are NULL or hold `n` handles each (cuda.h): node_list's contract.
        let (from, to) = unsafe { (node_list(from, n)?, node_list(to, n)?) };
        graph::remove_dependencies(handle_value(hGraph), &from, &to)
    }

    /// [`cuGraphRemoveDependencies`] with edge data: default edges only.
    fn cuGraphRemoveDependencies_v2(hGraph: Graph, from: *const Node, to: *const Node, edgeData: *const CUgraphEdgeData, n: usize) {
        // SAFETY: `edgeData` is NULL or holds `n` entries (cuda.h): default_edges's contract.
        unsafe { default_edges(edgeData, n) }?;
        // SAFETY: `from` and `to` are NULL or hold `n` handles each (cuda.h): node_list's contract.
        let (from, to) = unsafe { (node_list(from, n)?, node_list(to, n)?) };
        graph::remove_dependencies(handle_value(hGraph), &from, &to)
    }

    /// The nodes a node depends on.
    fn cuGraphNodeGetDependencies(hNode: Node, deps: *mut Node, num: *mut usize) {
        let list = graph::dependencies(handle_value(hNode))?;
        // SAFETY: `num` is NULL or readable and writable, `deps` NULL or room for `*num`
        // (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(deps, list)], std::ptr::null_mut(), num) }
    }

    /// [`cuGraphNodeGetDependencies`] with edge data (all default edges).
    fn cuGraphNodeGetDependencies_v2(hNode: Node, deps: *mut Node, edgeData: *mut CUgraphEdgeData, num: *mut usize) {
        let list = graph::dependencies(handle_value(hNode))?;
        // SAFETY: `num` is NULL or readable and writable, `deps` and `edgeData` NULL or room for
        // `*num` (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(deps, list)], edgeData, num) }
    }

    /// The nodes that depend on a node.
    fn cuGraphNodeGetDependentNodes(hNode: Node, nodes: *mut Node, num: *mut usize) {
        let list = graph::dependents(handle_value(hNode))?;
        // SAFETY: `num` is NULL or readable and writable, `nodes` NULL or room for `*num`
        // (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(nodes, list)], std::ptr::null_mut(), num) }
    }

    /// [`cuGraphNodeGetDependentNodes`] with edge data (all default edges).
    fn cuGraphNodeGetDependentNodes_v2(hNode: Node, nodes: *mut Node, edgeData: *mut CUgraphEdgeData, num: *mut usize) {
        let list = graph::dependents(handle_value(hNode))?;
        // SAFETY: `num` is NULL or readable and writable, `nodes` and `edgeData` NULL or room
        // for `*num` (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(nodes, list)], edgeData, num) }
    }

    /// The graph's edges as two arrays, `from[i]` → `to[i]`.
    fn cuGraphGetEdges(hGraph: Graph, from: *mut Node, to: *mut Node, num: *mut usize) {
        let (a, b): (Vec<u64>, Vec<u64>) = graph::edges(handle_value(hGraph))?.into_iter().unzip();
        // SAFETY: `num` is NULL or readable and writable, `from` and `to` NULL or room for
        // `*num` (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(from, a), (to, b)], std::ptr::null_mut(), num) }
    }

    /// [`cuGraphGetEdges`] with edge data (all default edges).
    fn cuGraphGetEdges_v2(hGraph: Graph, from: *mut Node, to: *mut Node, edgeData: *mut CUgraphEdgeData, num: *mut usize) {
        let (a, b): (Vec<u64>, Vec<u64>) = graph::edges(handle_value(hGraph))?.into_iter().unzip();
        // SAFETY: `num` is NULL or readable and writable, `from`, `to` and `edgeData` NULL or
        // room for `*num` (cuda.h): hand_out's contract.
        unsafe { hand_out(&[(from, a), (to, b)], edgeData, num) }
    }
}
