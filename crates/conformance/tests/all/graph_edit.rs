//! Editing a graph's shape after it is built: cuGraphDestroyNode removes a node with its edges,
//! cuGraphRemoveDependencies removes named edges (and refuses one that is not there), and the
//! dependency and edge queries count, fill and NULL-pad as cuda.h says, in their CUDA 10 and
//! CUDA 12.3 (`_v2`, edge data) forms. A graph holding memory nodes refuses node and edge
//! removal; cuda.h names no code for that, so those steps accept INVALID_VALUE or NOT_SUPPORTED
//! (docs/SOFTCUDA.md says so). No handle is used after its destruction here: on NVIDIA's driver
//! that crashes (softcuda's own tests check those answers).

use std::collections::HashSet;
use std::sync::Arc;

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::graph_memory::alloc_then_free;
use crate::graph_nodes::{
    add_child, add_fill, destroy, expect_found_at_cuda_13, instantiate, new_graph, nodes, run,
};
use crate::support::{Steps, env_or_skip};

type N = sys::CUgraphNode;

fn add_empty(g: sys::CUgraph, deps: &[N]) -> N {
    let mut n: N = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `deps` holds its length of nodes of `g`.
    let r = unsafe { sys::cuGraphAddEmptyNode(&mut n, g, deps.as_ptr(), deps.len()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphAddEmptyNode");
    n
}

/// cuGraphNodeGetDependencies into an array with room for `room` nodes: (result, nodes
/// written, the whole array).
fn deps_of(n: N, room: usize) -> (CUresult, usize, Vec<N>) {
    let mut out = vec![std::ptr::null_mut(); room];
    let mut num = room;
    // SAFETY: `out` holds `num` entries; the driver validates the node.
    let r = unsafe { sys::cuGraphNodeGetDependencies(n, out.as_mut_ptr(), &mut num) };
    (r, num, out)
}

/// cuGraphNodeGetDependentNodes, as [`deps_of`].
fn dependents_of(n: N, room: usize) -> (CUresult, usize, Vec<N>) {
    let mut out = vec![std::ptr::null_mut(); room];
    let mut num = room;
    // SAFETY: `out` holds `num` entries; the driver validates the node.
    let r = unsafe { sys::cuGraphNodeGetDependentNodes(n, out.as_mut_ptr(), &mut num) };
    (r, num, out)
}

/// The graph's edges as a set of (from, to), through the count-then-fill protocol.
fn edge_set(g: sys::CUgraph, steps: &mut Steps) -> HashSet<(usize, usize)> {
    let mut num = 0usize;
    // SAFETY: NULL arrays ask for the count only.
    let r =
        unsafe { sys::cuGraphGetEdges(g, std::ptr::null_mut(), std::ptr::null_mut(), &mut num) };
    steps.expect("cuGraphGetEdges (count)", r, CUresult::CUDA_SUCCESS);
    if num == 0 {
        return HashSet::new();
    }
    let (mut from, mut to) = (
        vec![std::ptr::null_mut(); num],
        vec![std::ptr::null_mut(); num],
    );
    // SAFETY: both arrays hold `num` entries.
    let r = unsafe { sys::cuGraphGetEdges(g, from.as_mut_ptr(), to.as_mut_ptr(), &mut num) };
    steps.expect("cuGraphGetEdges", r, CUresult::CUDA_SUCCESS);
    from.iter()
        .zip(&to)
        .take(num)
        .map(|(a, b)| (*a as usize, *b as usize))
        .collect()
}

fn remove(g: sys::CUgraph, from: N, to: N) -> CUresult {
    // SAFETY: one edge: both arrays hold one node.
    unsafe { sys::cuGraphRemoveDependencies(g, &from, &to, 1) }
}

fn set(nodes: &[N]) -> HashSet<usize> {
    nodes.iter().map(|n| *n as usize).collect()
}

/// Runs `body` alone on the device with a new graph (destroyed afterwards), the context, a
/// stream and the steps it records.
fn with_graph(body: impl FnOnce(&mut Steps, sys::CUgraph, &Arc<Context>, &Stream)) {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let mut steps = Steps::default();
    let g = new_graph();
    body(&mut steps, g, &ctx, &s);
    destroy(std::ptr::null_mut(), g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn destroy_node_removes_the_node_and_every_edge_to_or_from_it() {
    // a → b → c, and a → c.
    with_graph(|steps, g, _, s| {
        let a = add_empty(g, &[]);
        let b = add_empty(g, &[a]);
        let c = add_empty(g, &[a, b]);
        // SAFETY: a live node of `g`, destroyed once and not used afterwards.
        let r = unsafe { sys::cuGraphDestroyNode(b) };
        steps.expect("cuGraphDestroyNode", r, CUresult::CUDA_SUCCESS);
        let left = nodes(g);
        steps.check("two nodes left", set(&left) == set(&[a, c]), || {
            format!("{left:?}")
        });
        let edges = edge_set(g, steps);
        steps.check(
            "only a → c is left",
            edges == HashSet::from([(a as usize, c as usize)]),
            || format!("{edges:?}"),
        );
        let (r, num, got) = deps_of(c, 2);
        steps.expect("cuGraphNodeGetDependencies(c)", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "c depends on a alone",
            num == 1 && got == [a, std::ptr::null_mut()],
            || format!("{num} {got:?}"),
        );
        let (r, exec) = instantiate(g);
        steps.expect("instantiate after the removal", r, CUresult::CUDA_SUCCESS);
        steps.expect("launch", run(exec, s), CUresult::CUDA_SUCCESS);
        destroy(exec, std::ptr::null_mut());
    });
}

#[test]
fn remove_dependencies_removes_only_the_named_edges_and_refuses_one_not_there() {
    with_graph(|steps, g, _, _s| {
        let a = add_empty(g, &[]);
        let b = add_empty(g, &[]);
        let c = add_empty(g, &[a, b]);
        steps.expect("remove a → c", remove(g, a, c), CUresult::CUDA_SUCCESS);
        let edges = edge_set(g, steps);
        steps.check(
            "only b → c is left",
            edges == HashSet::from([(b as usize, c as usize)]),
            || format!("{edges:?}"),
        );
        steps.expect(
            "remove a → c again (not there)",
            remove(g, a, c),
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        steps.expect(
            "remove c → b (never there)",
            remove(g, c, b),
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        // SAFETY: with no dependencies the arrays are ignored (cuda.h).
        let r = unsafe { sys::cuGraphRemoveDependencies(g, std::ptr::null(), std::ptr::null(), 0) };
        steps.expect("remove no edges", r, CUresult::CUDA_SUCCESS);
        let edges = edge_set(g, steps);
        steps.check("b → c is still there", edges.len() == 1, || {
            format!("{edges:?}")
        });
        // The removed edge no longer orders a before c: an edge c → a is now acyclic.
        // SAFETY: one edge: both arrays hold one node.
        let r = unsafe { sys::cuGraphAddDependencies(g, &c, &a, 1) };
        steps.expect("add c → a after a → c is gone", r, CUresult::CUDA_SUCCESS);
    });
}

#[test]
fn dependency_queries_count_with_null_then_fill_and_null_pad_the_rest() {
    with_graph(|steps, g, _, _s| {
        let a = add_empty(g, &[]);
        let b = add_empty(g, &[]);
        let c = add_empty(g, &[a, b]);
        let d = add_empty(g, &[a]);
        let mut num = 0usize;
        // SAFETY: NULL array asks for the count only.
        let r = unsafe { sys::cuGraphNodeGetDependencies(c, std::ptr::null_mut(), &mut num) };
        steps.expect("count c's dependencies", r, CUresult::CUDA_SUCCESS);
        steps.check("c has 2 dependencies", num == 2, || format!("{num}"));
        let (r, num, got) = deps_of(c, 3);
        steps.expect(
            "c's dependencies into room for 3",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check(
            "a and b, then NULL; the count says 2",
            num == 2 && set(&got[..2]) == set(&[a, b]) && got[2].is_null(),
            || format!("{num} {got:?}"),
        );
        let (r, num, got) = dependents_of(a, 3);
        steps.expect("a's dependents", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "c and d, then NULL",
            num == 2 && set(&got[..2]) == set(&[c, d]) && got[2].is_null(),
            || format!("{num} {got:?}"),
        );
        let (r, num, _) = dependents_of(c, 1);
        steps.expect("c's dependents", r, CUresult::CUDA_SUCCESS);
        steps.check("c has none", num == 0, || format!("{num}"));
        let (r, num, _) = deps_of(a, 0);
        steps.expect(
            "a's dependencies (room for none)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check("a has none", num == 0, || format!("{num}"));
        let edges = edge_set(g, steps);
        let want = HashSet::from([
            (a as usize, c as usize),
            (b as usize, c as usize),
            (a as usize, d as usize),
        ]);
        steps.check("the three edges", edges == want, || format!("{edges:?}"));
        let mut num = 5usize;
        let (mut from, mut to) = ([std::ptr::null_mut(); 5], [std::ptr::null_mut(); 5]);
        // SAFETY: both arrays hold 5 entries.
        let r = unsafe { sys::cuGraphGetEdges(g, from.as_mut_ptr(), to.as_mut_ptr(), &mut num) };
        steps.expect("edges into room for 5", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "3 written, the rest NULL",
            num == 3 && from[3..].iter().chain(&to[3..]).all(|n| n.is_null()),
            || format!("{num} {from:?} {to:?}"),
        );
    });
}

#[test]
fn edge_data_forms_report_default_edges_and_remove_with_null_or_zeroed_data() {
    with_graph(|steps, g, _, _s| {
        let a = add_empty(g, &[]);
        let b = add_empty(g, &[a]);
        let c = add_empty(g, &[a]);
        // SAFETY: an all-zero CUgraphEdgeData is the default edge (plain bytes).
        let dirty: sys::CUgraphEdgeData = unsafe { std::mem::zeroed() };
        let mut data = [sys::CUgraphEdgeData { type_: 7, ..dirty }; 2];
        let (mut from, mut to, mut num) = ([std::ptr::null_mut(); 2], [std::ptr::null_mut(); 2], 2);
        // SAFETY: every array holds 2 entries.
        let r = unsafe {
            sys::cuGraphGetEdges_v2(
                g,
                from.as_mut_ptr(),
                to.as_mut_ptr(),
                data.as_mut_ptr(),
                &mut num,
            )
        };
        steps.expect("cuGraphGetEdges_v2", r, CUresult::CUDA_SUCCESS);
        let zeroed = |e: &sys::CUgraphEdgeData| {
            e.from_port == 0 && e.to_port == 0 && e.type_ == 0 && e.reserved == [0; 5]
        };
        steps.check(
            "2 edges, both default",
            num == 2 && data.iter().all(zeroed),
            || format!("{num} {data:?}"),
        );
        let mut dep = [std::ptr::null_mut(); 1];
        let mut dep_data = [sys::CUgraphEdgeData { type_: 7, ..dirty }; 1];
        let mut num = 1usize;
        // SAFETY: both arrays hold 1 entry.
        let r = unsafe {
            sys::cuGraphNodeGetDependencies_v2(b, dep.as_mut_ptr(), dep_data.as_mut_ptr(), &mut num)
        };
        steps.expect("cuGraphNodeGetDependencies_v2", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "b depends on a by a default edge",
            num == 1 && dep[0] == a && zeroed(&dep_data[0]),
            || format!("{num} {dep:?} {dep_data:?}"),
        );
        let mut num = 1usize;
        // SAFETY: both arrays hold 1 entry.
        let r = unsafe {
            sys::cuGraphNodeGetDependentNodes_v2(
                a,
                dep.as_mut_ptr(),
                dep_data.as_mut_ptr(),
                &mut num,
            )
        };
        steps.expect(
            "cuGraphNodeGetDependentNodes_v2 (room for 1 of 2)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.check(
            "one written",
            num == 1 && (dep[0] == b || dep[0] == c),
            || format!("{num} {dep:?}"),
        );
        // SAFETY: one edge; NULL edge data means default edges.
        let r = unsafe { sys::cuGraphRemoveDependencies_v2(g, &a, &b, std::ptr::null(), 1) };
        steps.expect("remove a → b, NULL edge data", r, CUresult::CUDA_SUCCESS);
        // SAFETY: one edge and its (default) data.
        let r = unsafe { sys::cuGraphRemoveDependencies_v2(g, &a, &c, &dirty, 1) };
        steps.expect("remove a → c, zeroed edge data", r, CUresult::CUDA_SUCCESS);
        let edges = edge_set(g, steps);
        steps.check("no edges left", edges.is_empty(), || format!("{edges:?}"));
    });
}

#[test]
fn graph_with_memory_nodes_refuses_node_and_edge_removal() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let (g, _, alloc, free) = alloc_then_free(&ctx, 4096, &mut steps);
    let refused = [
        CUresult::CUDA_ERROR_INVALID_VALUE,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
    ];
    steps.expect_any(
        "remove alloc → free (documented: an error, code not named)",
        remove(g, alloc, free),
        &refused,
    );
    // SAFETY: a live node; refused, so it stays live.
    let r = unsafe { sys::cuGraphDestroyNode(free) };
    steps.expect_any(
        "destroy the free node (documented: an error, code not named)",
        r,
        &refused,
    );
    let edges = edge_set(g, &mut steps);
    steps.check(
        "the edge is still there",
        edges == HashSet::from([(alloc as usize, free as usize)]),
        || format!("{edges:?}"),
    );
    steps.check("both nodes are still there", nodes(g).len() == 2, || {
        format!("{:?}", nodes(g))
    });
    destroy(std::ptr::null_mut(), g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn get_proc_address_finds_every_graph_edit_call_at_cuda_13() {
    let _shared = conformance::driver::shared_device();
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    for name in [
        "cuGraphDestroyNode",
        "cuGraphRemoveDependencies",
        "cuGraphNodeGetDependencies",
        "cuGraphNodeGetDependentNodes",
        "cuGraphGetEdges",
        "cuGraphExecChildGraphNodeSetParams",
    ] {
        expect_found_at_cuda_13(&mut steps, name);
    }
    steps.finish(&env.choice.kind.to_string());
}

const WORDS: usize = 16;

/// The buffer's 32-bit words, each `want`.
fn all_words(b: &DeviceBuffer, want: u32) -> bool {
    b.to_vec()
        .expect("read back")
        .chunks_exact(4)
        .all(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == want)
}

fn set_child(exec: sys::CUgraphExec, node: N, child: sys::CUgraph) -> CUresult {
    // SAFETY: live handles; the driver validates that `node` is a child-graph node of the
    // executable graph's graph.
    unsafe { sys::cuGraphExecChildGraphNodeSetParams(exec, node, child) }
}

/// A graph of `values.len()` fills of `dst`, each after the one before.
fn fills(dst: sys::CUdeviceptr, values: &[u32], ctx: &Context) -> sys::CUgraph {
    let g = new_graph();
    let mut last: Vec<N> = Vec::new();
    for v in values {
        let (r, n) = add_fill(g, &last, dst, *v, WORDS, ctx);
        assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphAddMemsetNode");
        last = vec![n];
    }
    g
}

/// A zeroed buffer `y`, a graph filling it with 7 then 1, and a child-graph node of that graph
/// in `parent`.
fn child_of_two_fills(
    steps: &mut Steps,
    parent: sys::CUgraph,
    ctx: &Arc<Context>,
) -> (DeviceBuffer, sys::CUgraph, N) {
    let y = DeviceBuffer::alloc(ctx, WORDS * 4).expect("y");
    y.fill(0).expect("clear");
    let child = fills(y.ptr(), &[7, 1], ctx);
    let (r, node) = add_child(parent, child);
    steps.expect("child-graph node", r, CUresult::CUDA_SUCCESS);
    (y, child, node)
}

#[test]
fn exec_child_graph_set_params_changes_later_launches_and_not_the_graph() {
    with_graph(|steps, parent, ctx, s| {
        let (y, child, node) = child_of_two_fills(steps, parent, ctx);
        let (r, exec) = instantiate(parent);
        steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
        steps.expect("first launch", run(exec, s), CUresult::CUDA_SUCCESS);
        steps.check("the child wrote 1", all_words(&y, 1), || "y".into());
        let update = fills(y.ptr(), &[7, 2], ctx);
        steps.expect(
            "cuGraphExecChildGraphNodeSetParams, same shape",
            set_child(exec, node, update),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "launch after the update",
            run(exec, s),
            CUresult::CUDA_SUCCESS,
        );
        steps.check("the updated child wrote 2", all_words(&y, 2), || "y".into());
        // The node itself is unchanged: a new instantiation of the parent writes 1 again.
        let (r, again) = instantiate(parent);
        steps.expect("instantiate again", r, CUresult::CUDA_SUCCESS);
        steps.expect("launch the new one", run(again, s), CUresult::CUDA_SUCCESS);
        steps.check("the graph's node still writes 1", all_words(&y, 1), || {
            "y".into()
        });
        destroy(again, update);
        destroy(exec, child);
    });
}

#[test]
fn exec_child_graph_set_params_refuses_a_graph_of_another_shape_and_a_node_that_is_no_child() {
    with_graph(|steps, parent, ctx, s| {
        let (y, child, node) = child_of_two_fills(steps, parent, ctx);
        let (r, own) = add_fill(parent, &[node], y.ptr(), 3, WORDS, ctx);
        steps.expect("a fill after it", r, CUresult::CUDA_SUCCESS);
        let (r, exec) = instantiate(parent);
        steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
        // cuda.h names INVALID_VALUE only; cuGraphExecUpdate's failures are
        // GRAPH_EXEC_UPDATE_FAILURE, so a shape mismatch may answer either.
        let mismatch = [
            CUresult::CUDA_ERROR_INVALID_VALUE,
            CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        ];
        let fewer = fills(y.ptr(), &[2], ctx);
        steps.expect_any(
            "one node where there were two",
            set_child(exec, node, fewer),
            &mismatch,
        );
        let unordered = new_graph();
        for v in [7, 2] {
            let (r, _) = add_fill(unordered, &[], y.ptr(), v, WORDS, ctx);
            steps.expect("fill without an edge", r, CUresult::CUDA_SUCCESS);
        }
        steps.expect_any(
            "the edge missing",
            set_child(exec, node, unordered),
            &mismatch,
        );
        let other_type = new_graph();
        let first = add_empty(other_type, &[]);
        let (r, _) = add_fill(other_type, &[first], y.ptr(), 2, WORDS, ctx);
        steps.expect("fill after an empty node", r, CUresult::CUDA_SUCCESS);
        steps.expect_any(
            "an empty node where a fill was",
            set_child(exec, node, other_type),
            &mismatch,
        );
        let same = fills(y.ptr(), &[7, 2], ctx);
        steps.expect(
            "a memset node given as the child-graph node",
            set_child(exec, own, same),
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
        steps.expect(
            "launch after the refusals",
            run(exec, s),
            CUresult::CUDA_SUCCESS,
        );
        steps.check("the fill after the child wrote 3", all_words(&y, 3), || {
            "y".into()
        });
        for g in [fewer, unordered, other_type, same] {
            destroy(std::ptr::null_mut(), g);
        }
        destroy(exec, child);
    });
}
