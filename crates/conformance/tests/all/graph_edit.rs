//! Editing a graph's shape after it is built: cuGraphDestroyNode removes a node with its edges,
//! cuGraphRemoveDependencies removes named edges (and refuses one that is not there), and the
//! dependency and edge queries count, fill and NULL-pad as cuda.h says, in their CUDA 10 and
//! CUDA 12.3 (`_v2`, edge data) forms. A graph holding memory nodes refuses node and edge
//! removal; cuda.h names no code for that, so those steps accept INVALID_VALUE or NOT_SUPPORTED
//! (docs/SOFTCUDA.md says so). No handle is used after its destruction here: on NVIDIA's driver
//! that crashes (softcuda's own tests check those answers).

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::graph_memory::{alloc_params, alloc_then_free};
use crate::graph_nodes::{
    Side, add_child, add_fill, copy_params, destroy, expect_found_at_cuda_13, instantiate,
    new_graph, nodes, run,
};
use crate::graphs::{N as N_WORDS, SaxpyArgs};
use crate::support::{Steps, clang_ptx, env_or_skip};

type N = sys::CUgraphNode;

/// What an out-array holds before a query, so a place the query NULLs shows.
const UNSET: N = std::ptr::dangling_mut();

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
    let mut out = vec![UNSET; room];
    let mut num = room;
    // SAFETY: `out` holds `num` entries; the driver validates the node.
    let r = unsafe { sys::cuGraphNodeGetDependencies(n, out.as_mut_ptr(), &mut num) };
    (r, num, out)
}

/// cuGraphNodeGetDependentNodes, as [`deps_of`].
fn dependents_of(n: N, room: usize) -> (CUresult, usize, Vec<N>) {
    let mut out = vec![UNSET; room];
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
/// stream and the steps it records; what `body` returns (a module its nodes use) is dropped
/// after the graph.
fn with_graph<R>(body: impl FnOnce(&mut Steps, sys::CUgraph, &Arc<Context>, &Stream) -> R) {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let mut steps = Steps::default();
    let g = new_graph();
    let keep = body(&mut steps, g, &ctx, &s);
    destroy(std::ptr::null_mut(), g);
    drop(keep);
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
        // Room for one, not none: NVIDIA's cuGraphGetNodes refuses an array with room for 0.
        let (r, num, got) = deps_of(a, 1);
        steps.expect("a's dependencies", r, CUresult::CUDA_SUCCESS);
        steps.check(
            "a has none; the entry is NULL",
            num == 0 && got[0].is_null(),
            || format!("{num} {got:?}"),
        );
        let edges = edge_set(g, steps);
        let want = HashSet::from([
            (a as usize, c as usize),
            (b as usize, c as usize),
            (a as usize, d as usize),
        ]);
        steps.check("the three edges", edges == want, || format!("{edges:?}"));
        let mut num = 5usize;
        let (mut from, mut to) = ([UNSET; 5], [UNSET; 5]);
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
        "cuGraphAddNode",
        "cuGraphNodeSetParams",
        "cuGraphExecNodeSetParams",
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

/// A `CUgraphNodeParams` of node type `kind`, its union member set by `fill`.
fn generic(
    kind: sys::CUgraphNodeType,
    fill: impl FnOnce(&mut sys::CUgraphNodeParams_st__bindgen_ty_1),
) -> sys::CUgraphNodeParams {
    // SAFETY: an all-zero CUgraphNodeParams is plain data (NULL pointers, zero sizes, type 0).
    let mut p: sys::CUgraphNodeParams = unsafe { std::mem::zeroed() };
    p.type_ = kind;
    fill(&mut p.__bindgen_anon_1);
    p
}

/// cuGraphAddNode after `deps`.
fn add_generic(g: sys::CUgraph, deps: &[N], p: &mut sys::CUgraphNodeParams) -> (CUresult, N) {
    let mut n: N = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `deps` holds its length of nodes; `p` and what it points to
    // outlive the call.
    let r = unsafe { sys::cuGraphAddNode(&mut n, g, deps.as_ptr(), deps.len(), p) };
    (r, n)
}

static HOST_CALLS: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_call(_: *mut c_void) {
    HOST_CALLS.fetch_add(1, Ordering::SeqCst);
}

fn type_of(n: N) -> sys::CUgraphNodeType {
    crate::graph_nodes::node_type(n)
}

#[test]
fn add_node_builds_every_node_type_softcuda_has_and_they_run_in_order() {
    with_graph(|steps, g, ctx, s| {
        use sys::CUgraphNodeType as T;
        let module = Module::load_ptx(ctx, &clang_ptx("saxpy")).expect("load saxpy");
        let saxpy = module.function("saxpy").expect("saxpy");
        let [x, y, z, w] = [(); 4].map(|_| DeviceBuffer::alloc(ctx, N_WORDS * 4).expect("buffer"));
        y.fill(0).expect("clear y");
        let mut event: sys::CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current (Context::primary binds it).
        let r = unsafe { sys::cuEventCreate(&mut event, 0) };
        steps.expect("cuEventCreate", r, CUresult::CUDA_SUCCESS);
        let mut fill_x = generic(T::CU_GRAPH_NODE_TYPE_MEMSET, |u| {
            u.memset = sys::CUDA_MEMSET_NODE_PARAMS_v2 {
                dst: x.ptr(),
                pitch: 0,
                value: 1.0f32.to_bits(),
                elementSize: 4,
                width: N_WORDS,
                height: 1,
                ctx: ctx.raw(),
            };
        });
        let mut args = SaxpyArgs::new(3.0, x.ptr(), y.ptr());
        let kernel = args.node(&saxpy);
        let mut launch = generic(T::CU_GRAPH_NODE_TYPE_KERNEL, |u| {
            // SAFETY: CUDA_KERNEL_NODE_PARAMS (v2) and the union's v3 member share one layout
            // (cuda.h); a plain copy of the bytes.
            unsafe {
                (&raw mut u.kernel)
                    .cast::<sys::CUDA_KERNEL_NODE_PARAMS>()
                    .write(kernel)
            };
        });
        let mut copy = generic(T::CU_GRAPH_NODE_TYPE_MEMCPY, |u| {
            u.memcpy.copyCtx = ctx.raw();
            u.memcpy.copyParams = copy_params(
                Side::device(y.ptr(), 0),
                Side::device(z.ptr(), 0),
                N_WORDS * 4,
                1,
            );
        });
        let mut empty = generic(T::CU_GRAPH_NODE_TYPE_EMPTY, |_| {});
        let mut host = generic(T::CU_GRAPH_NODE_TYPE_HOST, |u| {
            u.host.fn_ = Some(count_call);
        });
        let mut record = generic(T::CU_GRAPH_NODE_TYPE_EVENT_RECORD, |u| {
            u.eventRecord.event = event
        });
        let mut wait = generic(T::CU_GRAPH_NODE_TYPE_WAIT_EVENT, |u| {
            u.eventWait.event = event
        });
        let inner = new_graph();
        let (r, _) = add_fill(inner, &[], w.ptr(), 9, N_WORDS, ctx);
        steps.expect("fill in the child", r, CUresult::CUDA_SUCCESS);
        let mut child = generic(T::CU_GRAPH_NODE_TYPE_GRAPH, |u| u.graph.graph = inner);
        let mut last: Vec<N> = Vec::new();
        for (name, p, want) in [
            ("memset", &mut fill_x, T::CU_GRAPH_NODE_TYPE_MEMSET),
            ("kernel", &mut launch, T::CU_GRAPH_NODE_TYPE_KERNEL),
            ("memcpy", &mut copy, T::CU_GRAPH_NODE_TYPE_MEMCPY),
            ("empty", &mut empty, T::CU_GRAPH_NODE_TYPE_EMPTY),
            ("host", &mut host, T::CU_GRAPH_NODE_TYPE_HOST),
            (
                "event record",
                &mut record,
                T::CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            ),
            ("event wait", &mut wait, T::CU_GRAPH_NODE_TYPE_WAIT_EVENT),
            ("child graph", &mut child, T::CU_GRAPH_NODE_TYPE_GRAPH),
        ] {
            let (r, n) = add_generic(g, &last, p);
            steps.expect(
                &format!("cuGraphAddNode({name})"),
                r,
                CUresult::CUDA_SUCCESS,
            );
            if r == CUresult::CUDA_SUCCESS {
                steps.check(&format!("{name} node's type"), type_of(n) == want, || {
                    format!("{:?}", type_of(n))
                });
                last = vec![n];
            }
        }
        let before = HOST_CALLS.load(Ordering::SeqCst);
        let (r, exec) = instantiate(g);
        steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
        steps.expect("launch", run(exec, s), CUresult::CUDA_SUCCESS);
        let floats = |b: &DeviceBuffer| -> Vec<f32> {
            let v = b.to_vec().expect("read back");
            v.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        steps.check(
            "z = copy of y = 3·1",
            floats(&z).iter().all(|v| *v == 3.0),
            || format!("{:?}", &floats(&z)[..4]),
        );
        steps.check("the child filled w", all_words(&w, 9), || "w".into());
        steps.check(
            "the host node ran once",
            HOST_CALLS.load(Ordering::SeqCst) == before + 1,
            || format!("{}", HOST_CALLS.load(Ordering::SeqCst) - before),
        );
        destroy(exec, inner);
        // SAFETY: a live event; the graph that used it has run and its executable graph is gone.
        unsafe { sys::cuEventDestroy_v2(event) };
        module
    });
}

#[test]
fn add_node_memory_nodes_write_the_address_back_and_v2_takes_default_edge_data() {
    with_graph(|steps, g, ctx, _| {
        use sys::CUgraphNodeType as T;
        let params = alloc_params(ctx.device(), 4096);
        let mut alloc = generic(T::CU_GRAPH_NODE_TYPE_MEM_ALLOC, |u| {
            // SAFETY: CUDA_MEM_ALLOC_NODE_PARAMS v1 and the union's v2 member share one layout
            // (cuda.h); a plain copy of the bytes (no access descriptors).
            unsafe {
                (&raw mut u.alloc)
                    .cast::<sys::CUDA_MEM_ALLOC_NODE_PARAMS>()
                    .write(params)
            };
        });
        let (r, a) = add_generic(g, &[], &mut alloc);
        steps.expect("cuGraphAddNode(mem alloc)", r, CUresult::CUDA_SUCCESS);
        // SAFETY: the union's alloc member is the one written (above and by the driver).
        let dptr = unsafe { alloc.__bindgen_anon_1.alloc.dptr };
        steps.check("the address is written back", dptr != 0, || "0".into());
        let mut free = generic(T::CU_GRAPH_NODE_TYPE_MEM_FREE, |u| u.free.dptr = dptr);
        // SAFETY: an all-zero CUgraphEdgeData is the default edge (plain bytes).
        let edge: sys::CUgraphEdgeData = unsafe { std::mem::zeroed() };
        let mut f: N = std::ptr::null_mut();
        // SAFETY: valid out-pointer; one dependency and its edge data; `free` outlives the call.
        let r = unsafe { sys::cuGraphAddNode_v2(&mut f, g, &a, &edge, 1, &mut free) };
        steps.expect(
            "cuGraphAddNode_v2(mem free, default edge)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        if r == CUresult::CUDA_SUCCESS {
            steps.check(
                "types",
                type_of(a) == T::CU_GRAPH_NODE_TYPE_MEM_ALLOC
                    && type_of(f) == T::CU_GRAPH_NODE_TYPE_MEM_FREE,
                || format!("{:?} {:?}", type_of(a), type_of(f)),
            );
            let mut freed = 0;
            // SAFETY: valid out-pointer; a live mem-free node.
            let r = unsafe { sys::cuGraphMemFreeNodeGetParams(f, &mut freed) };
            steps.expect("cuGraphMemFreeNodeGetParams", r, CUresult::CUDA_SUCCESS);
            steps.check("the free node frees the address", freed == dptr, || {
                format!("{freed:#x}")
            });
        }
    });
}

#[test]
fn node_set_params_and_exec_node_set_params_replace_a_copy_for_later_launches() {
    with_graph(|steps, g, ctx, s| {
        use sys::CUgraphNodeType as T;
        let [y, z, w] = [(); 3].map(|_| DeviceBuffer::alloc(ctx, WORDS * 4).expect("buffer"));
        y.write(&[5; WORDS * 4]).expect("y");
        z.fill(0).expect("z");
        w.fill(0).expect("w");
        let copy_to = |dst: &DeviceBuffer| {
            generic(T::CU_GRAPH_NODE_TYPE_MEMCPY, |u| {
                u.memcpy.copyCtx = ctx.raw();
                u.memcpy.copyParams = copy_params(
                    Side::device(y.ptr(), 0),
                    Side::device(dst.ptr(), 0),
                    WORDS * 4,
                    1,
                );
            })
        };
        let (r, n) = add_generic(g, &[], &mut copy_to(&z));
        steps.expect("cuGraphAddNode(memcpy y → z)", r, CUresult::CUDA_SUCCESS);
        // SAFETY: a live node; the parameters outlive the call.
        let r = unsafe { sys::cuGraphNodeSetParams(n, &mut copy_to(&w)) };
        steps.expect(
            "cuGraphNodeSetParams(memcpy y → w)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        let mut fill = generic(T::CU_GRAPH_NODE_TYPE_MEMSET, |u| {
            u.memset = sys::CUDA_MEMSET_NODE_PARAMS_v2 {
                dst: z.ptr(),
                pitch: 0,
                value: 1,
                elementSize: 4,
                width: WORDS,
                height: 1,
                ctx: ctx.raw(),
            };
        });
        // SAFETY: a live node; the parameters outlive the call.
        let r = unsafe { sys::cuGraphNodeSetParams(n, &mut fill) };
        steps.expect_any(
            "memset parameters for a memcpy node (cuda.h: one of these two)",
            r,
            &[
                CUresult::CUDA_ERROR_INVALID_VALUE,
                CUresult::CUDA_ERROR_NOT_SUPPORTED,
            ],
        );
        let (r, exec) = instantiate(g);
        steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
        steps.expect("launch", run(exec, s), CUresult::CUDA_SUCCESS);
        steps.check("the node copied into w", all_words(&w, 0x0505_0505), || {
            "w".into()
        });
        steps.check("and not into z", all_words(&z, 0), || "z".into());
        // SAFETY: live handles; the parameters outlive the call.
        let r = unsafe { sys::cuGraphExecNodeSetParams(exec, n, &mut copy_to(&z)) };
        steps.expect(
            "cuGraphExecNodeSetParams(memcpy y → z)",
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.expect("launch again", run(exec, s), CUresult::CUDA_SUCCESS);
        steps.check(
            "the launch copied into z",
            all_words(&z, 0x0505_0505),
            || "z".into(),
        );
        destroy(exec, std::ptr::null_mut());
    });
}
