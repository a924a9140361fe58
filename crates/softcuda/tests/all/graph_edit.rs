//! Graph editing answers that cannot be checked on NVIDIA's driver (a destroyed handle is a
//! dangling pointer there) or that are softcuda's own: a destroyed node's handle is unknown
//! afterwards; cuGraphAddNode refuses a node type softcuda has no node for, a value that is no
//! node type, a child graph moved into its node, and edge data that is not a default edge.

use std::ffi::c_void;

use cudarc::driver::sys::{CUgraphEdgeData, CUgraphNodeParams, CUresult};
use softcuda::exports::*;

use crate::common::{fresh_primary, ok, serial};

type Handle = *mut c_void;

fn new_graph() -> Handle {
    let mut g: Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    ok(unsafe { cuGraphCreate(&mut g, 0) });
    g
}

fn empty(g: Handle) -> Handle {
    let mut n: Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer, no dependencies.
    ok(unsafe { cuGraphAddEmptyNode(&mut n, g, std::ptr::null(), 0) });
    n
}

/// cuGraphAddNode with the raw node type `kind` and `body` (u64 words) as the union.
fn add_raw(g: Handle, kind: u32, body: &[u64]) -> CUresult {
    // SAFETY: all-zero bytes are a valid CUgraphNodeParams (type 0, NULL pointers).
    let mut p: CUgraphNodeParams = unsafe { std::mem::zeroed() };
    // SAFETY: the type and the union are written as the C struct's bytes; Rust never reads the
    // type field as its enum.
    unsafe {
        (&raw mut p.type_).cast::<u32>().write(kind);
        let words = (&raw mut p.__bindgen_anon_1).cast::<u64>();
        for (i, w) in body.iter().enumerate() {
            words.add(i).write(*w);
        }
    }
    let mut n: Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer and parameters, no dependencies.
    unsafe { cuGraphAddNode(&mut n, g, std::ptr::null(), 0, &mut p) }
}

#[test]
fn a_destroyed_node_is_an_unknown_handle_afterwards() {
    let _g = serial();
    fresh_primary();
    let g = new_graph();
    let a = empty(g);
    let b = empty(g);
    // SAFETY: one edge: both arrays hold one node.
    ok(unsafe { cuGraphAddDependencies(g, &a, &b, 1) });
    // SAFETY: a live node.
    ok(unsafe { cuGraphDestroyNode(a) });
    let mut kind = 0u32;
    let mut num = 0usize;
    // SAFETY: valid out-pointers; the node handle is checked by the driver.
    unsafe {
        assert_eq!(cuGraphDestroyNode(a), CUresult::CUDA_ERROR_INVALID_VALUE);
        assert_eq!(
            cuGraphNodeGetType(a, &mut kind),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuGraphNodeGetDependencies(a, std::ptr::null_mut(), &mut num),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuGraphRemoveDependencies(g, &a, &b, 1),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuGraphNodeGetDependencies(
            b,
            std::ptr::null_mut(),
            &mut num,
        ));
    }
    assert_eq!(num, 0, "the edge went with the node");
    // SAFETY: a live graph.
    ok(unsafe { cuGraphDestroy(g) });
}

#[test]
fn add_node_refuses_types_softcuda_lacks_unknown_types_moved_children_and_custom_edges() {
    let _g = serial();
    fresh_primary();
    let g = new_graph();
    for kind in [8, 9, 12, 13] {
        assert_eq!(
            add_raw(g, kind, &[]),
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            "type {kind}"
        );
    }
    assert_eq!(add_raw(g, 99, &[]), CUresult::CUDA_ERROR_INVALID_VALUE);
    let child = new_graph();
    // CUDA_CHILD_GRAPH_NODE_PARAMS { graph, ownership = MOVE (1) }.
    let moved = add_raw(g, 4, &[child as u64, 1]);
    assert_eq!(moved, CUresult::CUDA_ERROR_NOT_SUPPORTED);
    assert_eq!(add_raw(g, 4, &[child as u64, 0]), CUresult::CUDA_SUCCESS);
    let a = empty(g);
    // SAFETY: all-zero bytes are the default edge.
    let mut edge: CUgraphEdgeData = unsafe { std::mem::zeroed() };
    edge.to_port = 1;
    // SAFETY: all-zero bytes are a valid CUgraphNodeParams: an empty node (type 5 set below).
    let mut p: CUgraphNodeParams = unsafe { std::mem::zeroed() };
    // SAFETY: the type is written as the C enum's u32.
    unsafe { (&raw mut p.type_).cast::<u32>().write(5) };
    let mut n: Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer, one dependency with its edge data.
    let r = unsafe { cuGraphAddNode_v2(&mut n, g, &a, &edge, 1, &mut p) };
    assert_eq!(r, CUresult::CUDA_ERROR_NOT_SUPPORTED, "a programmatic port");
    edge.to_port = 0;
    // SAFETY: as above, now a default edge.
    ok(unsafe { cuGraphAddNode_v2(&mut n, g, &a, &edge, 1, &mut p) });
    // SAFETY: live graphs.
    unsafe {
        ok(cuGraphDestroy(g));
        ok(cuGraphDestroy(child));
    }
}
