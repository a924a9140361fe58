//! Graph nodes built by hand beyond kernels: a child-graph node runs its own clone of the graph
//! given, in dependency order within its parent, and the graph it owns can be changed through
//! cuGraphChildGraphNodeGetGraph; cuGraphClone copies a graph; memcpy nodes copy 1D and pitched
//! 2D linear memory, give their parameters back, and take new ones in the graph and in an
//! executable graph. Each test runs alone (graphs on NVIDIA are not thread-safe objects, and
//! the tests share a device).

use std::ffi::c_void;
use std::sync::Arc;

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::{DeviceBuffer, PinnedBuffer};
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, env_or_skip};

type MemType = sys::CUmemorytype;

/// A new empty graph.
pub(crate) fn new_graph() -> sys::CUgraph {
    let mut g: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    let r = unsafe { sys::cuGraphCreate(&mut g, 0) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphCreate");
    g
}

/// cuGraphInstantiateWithFlags(graph, 0).
pub(crate) fn instantiate(g: sys::CUgraph) -> (CUresult, sys::CUgraphExec) {
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver validates the graph.
    let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, g, 0) };
    (r, exec)
}

/// Launches `exec` on `s` and waits for it.
pub(crate) fn run(exec: sys::CUgraphExec, s: &Stream) -> CUresult {
    // SAFETY: a live executable graph and stream.
    match unsafe { sys::cuGraphLaunch(exec, s.raw()) } {
        CUresult::CUDA_SUCCESS => {
            // SAFETY: a live stream.
            unsafe { sys::cuStreamSynchronize(s.raw()) }
        }
        r => r,
    }
}

/// Destroys an executable graph and a graph (either may be NULL).
pub(crate) fn destroy(exec: sys::CUgraphExec, g: sys::CUgraph) {
    // SAFETY: each handle is live or NULL, destroyed once; the stream that ran it was
    // synchronized.
    unsafe {
        if !exec.is_null() {
            sys::cuGraphExecDestroy(exec);
        }
        if !g.is_null() {
            sys::cuGraphDestroy(g);
        }
    }
}

/// The graph's nodes.
pub(crate) fn nodes(g: sys::CUgraph) -> Vec<sys::CUgraphNode> {
    let mut count = 0usize;
    // SAFETY: NULL nodes asks for the count only.
    let r = unsafe { sys::cuGraphGetNodes(g, std::ptr::null_mut(), &mut count) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphGetNodes(count)");
    if count == 0 {
        // An array with room for none is INVALID_VALUE (get_nodes_into_room_for_none_...).
        return Vec::new();
    }
    let mut out = vec![std::ptr::null_mut(); count];
    // SAFETY: `out` holds `count` entries.
    let r = unsafe { sys::cuGraphGetNodes(g, out.as_mut_ptr(), &mut count) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphGetNodes");
    out.truncate(count);
    out
}

/// A node's type.
pub(crate) fn node_type(n: sys::CUgraphNode) -> sys::CUgraphNodeType {
    let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: valid out-pointer; the driver validates the node.
    let r = unsafe { sys::cuGraphNodeGetType(n, &mut t) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphNodeGetType");
    t
}

/// One side of a copy: (memory type, host pointer, device address, pitch).
#[derive(Clone, Copy)]
pub(crate) struct Side {
    pub kind: MemType,
    pub host: *mut c_void,
    pub device: sys::CUdeviceptr,
    pub pitch: usize,
}

impl Side {
    pub(crate) fn device(ptr: sys::CUdeviceptr, pitch: usize) -> Side {
        Side {
            kind: MemType::CU_MEMORYTYPE_DEVICE,
            host: std::ptr::null_mut(),
            device: ptr,
            pitch,
        }
    }

    pub(crate) fn host(ptr: *mut u8) -> Side {
        Side {
            kind: MemType::CU_MEMORYTYPE_HOST,
            host: ptr.cast(),
            device: 0,
            pitch: 0,
        }
    }
}

/// A `CUDA_MEMCPY3D` of `height` rows of `width` bytes in one slice, from row 0, column 0; a
/// side without a pitch gets `width`.
pub(crate) fn copy_params(src: Side, dst: Side, width: usize, height: usize) -> sys::CUDA_MEMCPY3D {
    let pitch = |s: &Side| if s.pitch == 0 { width } else { s.pitch };
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: src.kind,
        srcHost: src.host,
        srcDevice: src.device,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: pitch(&src),
        srcHeight: height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: dst.kind,
        dstHost: dst.host,
        dstDevice: dst.device,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: pitch(&dst),
        dstHeight: height,
        WidthInBytes: width,
        Height: height,
        Depth: 1,
    }
}

/// cuGraphAddMemcpyNode in the current context.
pub(crate) fn add_copy(
    g: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    p: &sys::CUDA_MEMCPY3D,
    ctx: &Context,
) -> (CUresult, sys::CUgraphNode) {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `deps` holds its length of nodes; `p` outlives the call (the
    // driver copies it) and its pointers are the caller's live buffers.
    let r =
        unsafe { sys::cuGraphAddMemcpyNode(&mut n, g, deps.as_ptr(), deps.len(), p, ctx.raw()) };
    (r, n)
}

/// A memset node filling `count` 32-bit words at `dst` with `value`.
pub(crate) fn add_fill(
    g: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    dst: sys::CUdeviceptr,
    value: u32,
    count: usize,
    ctx: &Context,
) -> (CUresult, sys::CUgraphNode) {
    let p = sys::CUDA_MEMSET_NODE_PARAMS {
        dst,
        pitch: 0,
        value,
        elementSize: 4,
        width: count,
        height: 1,
    };
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `deps` holds its length of nodes; `p` outlives the call.
    let r =
        unsafe { sys::cuGraphAddMemsetNode(&mut n, g, deps.as_ptr(), deps.len(), &p, ctx.raw()) };
    (r, n)
}

/// cuGraphAddChildGraphNode without dependencies.
pub(crate) fn add_child(parent: sys::CUgraph, child: sys::CUgraph) -> (CUresult, sys::CUgraphNode) {
    let mut node: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver validates the graphs.
    let r = unsafe { sys::cuGraphAddChildGraphNode(&mut node, parent, std::ptr::null(), 0, child) };
    (r, node)
}

/// A zeroed device buffer of `WORDS` words.
fn zeroed(ctx: &Arc<Context>) -> DeviceBuffer {
    let b = DeviceBuffer::alloc(ctx, WORDS * 4).expect("buffer");
    b.fill(0).expect("clear");
    b
}

/// Adds the edge `from` → `to`.
fn edge(g: sys::CUgraph, from: sys::CUgraphNode, to: sys::CUgraphNode) -> CUresult {
    // SAFETY: one edge: both arrays hold one node.
    unsafe { sys::cuGraphAddDependencies(g, &from, &to, 1) }
}

fn words(b: &DeviceBuffer) -> Vec<u32> {
    b.to_vec()
        .expect("read back")
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Checks that memcpy node `n` reads back as a one-row copy of `WORDS` words from `src` to
/// `dst`.
fn check_copy_params(
    steps: &mut Steps,
    step: &str,
    n: sys::CUgraphNode,
    src: sys::CUdeviceptr,
    dst: sys::CUdeviceptr,
) {
    let mut got = copy_params(Side::device(0, 0), Side::device(0, 0), 0, 1);
    // SAFETY: valid out-pointer; the driver validates the node.
    let r = unsafe { sys::cuGraphMemcpyNodeGetParams(n, &mut got) };
    steps.expect(
        &format!("cuGraphMemcpyNodeGetParams: {step}"),
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.check(
        step,
        got.srcDevice == src
            && got.dstDevice == dst
            && got.WidthInBytes == WORDS * 4
            && got.Height == 1
            && got.Depth == 1,
        || {
            format!(
                "src {:#x} dst {:#x} width {}",
                got.srcDevice, got.dstDevice, got.WidthInBytes
            )
        },
    );
}

fn setup() -> Option<(Arc<Context>, Stream, String)> {
    let env = env_or_skip()?;
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    Some((ctx, s, env.choice.kind.to_string()))
}

const WORDS: usize = 16;

#[test]
fn child_graph_node_runs_a_clone_of_its_graph_in_dependency_order() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let [y, z, w] = [(); 3].map(|_| zeroed(&ctx));
    // The child copies y into z.
    let child = new_graph();
    let (r, _) = add_copy(
        child,
        &[],
        &copy_params(
            Side::device(y.ptr(), 0),
            Side::device(z.ptr(), 0),
            WORDS * 4,
            1,
        ),
        &ctx,
    );
    steps.expect("memcpy node in the child", r, CUresult::CUDA_SUCCESS);

    // Parent: fill y := 1, then the child, then copy z into w; made in the opposite order, so
    // only the edges put them right.
    let parent = new_graph();
    let (r_after, after) = add_copy(
        parent,
        &[],
        &copy_params(
            Side::device(z.ptr(), 0),
            Side::device(w.ptr(), 0),
            WORDS * 4,
            1,
        ),
        &ctx,
    );
    let (r_child, node) = add_child(parent, child);
    let (r_before, before) = add_fill(parent, &[], y.ptr(), 1, WORDS, &ctx);
    steps.check(
        "nodes added",
        [r_after, r_child, r_before]
            .iter()
            .all(|r| *r == CUresult::CUDA_SUCCESS),
        || format!("{:?}", [r_after, r_child, r_before]),
    );
    steps.expect(
        "edge fill → child",
        edge(parent, before, node),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "edge child → copy",
        edge(parent, node, after),
        CUresult::CUDA_SUCCESS,
    );
    steps.check(
        "the node is a child-graph node",
        node_type(node) == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_GRAPH,
        || format!("{:?}", node_type(node)),
    );

    // The child was cloned at add: a node added to it now does not reach the parent.
    let (r, _) = add_fill(child, &[], z.ptr(), 99, WORDS, &ctx);
    steps.expect(
        "fill added to the original child",
        r,
        CUresult::CUDA_SUCCESS,
    );

    let (r, exec) = instantiate(parent);
    steps.expect("instantiate the parent", r, CUresult::CUDA_SUCCESS);
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "fill, then the child's copy, then the parent's copy: w = z = 1",
        words(&z).iter().all(|v| *v == 1) && words(&w).iter().all(|v| *v == 1),
        || format!("z {:?}, w {:?}", &words(&z)[..2], &words(&w)[..2]),
    );
    destroy(exec, parent);
    destroy(std::ptr::null_mut(), child);
    steps.finish(&driver);
}

#[test]
fn the_graph_a_child_node_owns_can_be_changed_but_takes_no_memory_nodes() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let z = zeroed(&ctx);
    let child = new_graph();
    let (r, _) = add_fill(child, &[], z.ptr(), 3, WORDS, &ctx);
    steps.expect("fill node in the child", r, CUresult::CUDA_SUCCESS);
    let parent = new_graph();
    let (r, node) = add_child(parent, child);
    steps.expect("cuGraphAddChildGraphNode", r, CUresult::CUDA_SUCCESS);
    let mut owned: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer and node.
    let r = unsafe { sys::cuGraphChildGraphNodeGetGraph(node, &mut owned) };
    steps.expect("cuGraphChildGraphNodeGetGraph", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "the node owns a clone, not the graph given",
        owned != child && !owned.is_null(),
        || format!("{owned:?}"),
    );

    // A fill of 5 after the owned graph's fill of 3 changes what the node runs.
    let inner = nodes(owned);
    steps.check(
        "the owned graph holds the one fill",
        inner.len() == 1,
        || format!("{} nodes", inner.len()),
    );
    let (r, _) = add_fill(owned, &inner, z.ptr(), 5, WORDS, &ctx);
    steps.expect("fill added to the owned graph", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "the graph given is unchanged",
        nodes(child).len() == 1,
        || format!("{} nodes", nodes(child).len()),
    );
    let (r, exec) = instantiate(parent);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the node ran the changed graph: z = 5",
        words(&z).iter().all(|v| *v == 5),
        || format!("{:?}", &words(&z)[..2]),
    );

    // SAFETY: an all-zero CUDA_MEM_ALLOC_NODE_PARAMS is plain data; the fields used are set.
    let mut alloc: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
    alloc.poolProps.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    alloc.poolProps.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    alloc.poolProps.location.id = ctx.device();
    alloc.bytesize = 4096;
    let mut m: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer and parameters; the graph is live.
    let r = unsafe { sys::cuGraphAddMemAllocNode(&mut m, owned, std::ptr::null(), 0, &mut alloc) };
    steps.expect(
        "a mem-alloc node in a graph a child node owns (not documented; NVIDIA 580's code)",
        r,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
    );
    destroy(exec, parent);
    destroy(std::ptr::null_mut(), child);
    steps.finish(&driver);
}

#[test]
fn cloned_graph_runs_like_the_original_and_is_independent_of_it() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let z = zeroed(&ctx);
    let g = new_graph();
    let (r, first) = add_fill(g, &[], z.ptr(), 8, WORDS, &ctx);
    steps.expect("fill node", r, CUresult::CUDA_SUCCESS);
    let mut copy: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer and graph.
    let r = unsafe { sys::cuGraphClone(&mut copy, g) };
    steps.expect("cuGraphClone", r, CUresult::CUDA_SUCCESS);
    let (r, _) = add_fill(g, &[first], z.ptr(), 9, WORDS, &ctx);
    steps.expect("fill added to the original", r, CUresult::CUDA_SUCCESS);
    steps.check("the clone keeps one node", nodes(copy).len() == 1, || {
        format!("{} nodes", nodes(copy).len())
    });
    let (r, exec) = instantiate(copy);
    steps.expect("instantiate the clone", r, CUresult::CUDA_SUCCESS);
    steps.expect("launch the clone", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the clone filled 8",
        words(&z).iter().all(|v| *v == 8),
        || format!("{:?}", &words(&z)[..2]),
    );
    destroy(exec, copy);
    destroy(std::ptr::null_mut(), g);
    steps.finish(&driver);
}

#[test]
fn memcpy_nodes_copy_host_and_pitched_device_memory_on_every_launch() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    // host → a (64 bytes), a → rows of b (4 rows of 16 bytes, 32 bytes apart), b → host.
    let (input, output) = (
        PinnedBuffer::alloc(&ctx, 64).expect("pinned"),
        PinnedBuffer::alloc(&ctx, 128).expect("pinned"),
    );
    let (a, b) = (
        DeviceBuffer::alloc(&ctx, 64).expect("a"),
        DeviceBuffer::alloc(&ctx, 128).expect("b"),
    );
    b.fill(0xee).expect("b");
    let fill_input = |base: u8| {
        // SAFETY: 64 pinned bytes, no copy in flight.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (0..64).map(|i| base + i).collect::<Vec<u8>>().as_ptr(),
                input.ptr(),
                64,
            )
        }
    };
    fill_input(0);
    let g = new_graph();
    let up = copy_params(Side::host(input.ptr()), Side::device(a.ptr(), 0), 64, 1);
    let rows = copy_params(Side::device(a.ptr(), 16), Side::device(b.ptr(), 32), 16, 4);
    let down = copy_params(Side::device(b.ptr(), 0), Side::host(output.ptr()), 128, 1);
    let (r1, n1) = add_copy(g, &[], &up, &ctx);
    let (r2, n2) = add_copy(g, &[n1], &rows, &ctx);
    let (r3, _) = add_copy(g, &[n2], &down, &ctx);
    steps.check(
        "three memcpy nodes",
        [r1, r2, r3].iter().all(|r| *r == CUresult::CUDA_SUCCESS),
        || format!("{:?}", [r1, r2, r3]),
    );
    steps.check(
        "memcpy node type",
        node_type(n2) == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY,
        || format!("{:?}", node_type(n2)),
    );
    let want = |base: u8| -> Vec<u8> {
        (0..128usize)
            .map(|i| {
                if i % 32 < 16 {
                    base + (i / 32 * 16 + i % 32) as u8
                } else {
                    0xee
                }
            })
            .collect()
    };
    let (r, exec) = instantiate(g);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "rows land 32 bytes apart, the gaps untouched",
        output.read() == want(0),
        || format!("{:?}", &output.read()[..40]),
    );
    fill_input(100);
    steps.expect("second launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the host copy reads the host buffer at each launch",
        output.read() == want(100),
        || format!("{:?}", &output.read()[..40]),
    );
    destroy(exec, g);
    steps.finish(&driver);
}

#[test]
fn memcpy_node_parameters_read_back_and_updates_apply_to_the_graph_and_the_executable_graph() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let [a, b, c] = [(); 3].map(|_| DeviceBuffer::alloc(&ctx, WORDS * 4).expect("buffer"));
    a.write(&[1; WORDS * 4]).expect("a");
    b.write(&[2; WORDS * 4]).expect("b");
    c.fill(0).expect("c");
    let g = new_graph();
    let from_a = copy_params(
        Side::device(a.ptr(), 0),
        Side::device(c.ptr(), 0),
        WORDS * 4,
        1,
    );
    let from_b = copy_params(
        Side::device(b.ptr(), 0),
        Side::device(c.ptr(), 0),
        WORDS * 4,
        1,
    );
    let (r, n) = add_copy(g, &[], &from_a, &ctx);
    steps.expect("memcpy node", r, CUresult::CUDA_SUCCESS);
    check_copy_params(
        &mut steps,
        "the parameters read back as given",
        n,
        a.ptr(),
        c.ptr(),
    );
    let (r, exec) = instantiate(g);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    // SAFETY: live executable graph and node; `from_b` outlives the call.
    let r = unsafe { sys::cuGraphExecMemcpyNodeSetParams(exec, n, &from_b, ctx.raw()) };
    steps.expect(
        "cuGraphExecMemcpyNodeSetParams (1D → 1D)",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the executable graph copies from b",
        c.to_vec().expect("c").iter().all(|v| *v == 2),
        || "c is not b".into(),
    );
    c.fill(0).expect("c");
    let (r, fresh) = instantiate(g);
    steps.expect("instantiate again", r, CUresult::CUDA_SUCCESS);
    steps.expect(
        "launch the fresh one",
        run(fresh, &s),
        CUresult::CUDA_SUCCESS,
    );
    steps.check(
        "the graph itself still copies from a",
        c.to_vec().expect("c").iter().all(|v| *v == 1),
        || "c is not a".into(),
    );
    // SAFETY: live node; `from_b` outlives the call.
    let r = unsafe { sys::cuGraphMemcpyNodeSetParams(n, &from_b) };
    steps.expect("cuGraphMemcpyNodeSetParams", r, CUresult::CUDA_SUCCESS);
    check_copy_params(
        &mut steps,
        "the graph's node now reads from b",
        n,
        b.ptr(),
        c.ptr(),
    );
    let pitched = copy_params(Side::device(a.ptr(), 16), Side::device(c.ptr(), 16), 16, 2);
    // SAFETY: live executable graph and node; `pitched` outlives the call.
    let r = unsafe { sys::cuGraphExecMemcpyNodeSetParams(exec, n, &pitched, ctx.raw()) };
    steps.expect(
        "cuGraphExecMemcpyNodeSetParams with a 2D copy",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    destroy(fresh, std::ptr::null_mut());
    destroy(exec, g);
    steps.finish(&driver);
}

#[test]
fn memcpy_node_past_its_allocation_is_invalid_value() {
    let _alone = exclusive_device();
    let Some((ctx, _s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let (a, c) = (
        DeviceBuffer::alloc(&ctx, 64).expect("a"),
        DeviceBuffer::alloc(&ctx, 64).expect("c"),
    );
    let g = new_graph();
    let past = copy_params(Side::device(a.ptr(), 0), Side::device(c.ptr(), 0), 128, 1);
    let (r, _) = add_copy(g, &[], &past, &ctx);
    steps.expect(
        "128 bytes from a 64-byte allocation",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let narrow = copy_params(Side::device(a.ptr(), 8), Side::device(c.ptr(), 16), 16, 2);
    let (r, _) = add_copy(g, &[], &narrow, &ctx);
    steps.expect(
        "rows wider than the source pitch",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.check("no node was added", nodes(g).is_empty(), || {
        format!("{} nodes", nodes(g).len())
    });
    destroy(std::ptr::null_mut(), g);
    steps.finish(&driver);
}

#[test]
fn get_nodes_into_room_for_none_is_invalid_value_and_a_count_query_is_not() {
    let _shared = conformance::driver::shared_device();
    let Some((_ctx, _s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let g = new_graph();
    let (mut count, mut slot) = (0usize, std::ptr::null_mut());
    // SAFETY: NULL nodes asks for the count only; the graph is live.
    let r = unsafe { sys::cuGraphGetNodes(g, std::ptr::null_mut(), &mut count) };
    steps.expect("count of an empty graph", r, CUresult::CUDA_SUCCESS);
    steps.check("an empty graph has 0 nodes", count == 0, || {
        format!("{count}")
    });
    // SAFETY: `slot` is one writable entry; the count says there is room for none.
    let r = unsafe { sys::cuGraphGetNodes(g, &mut slot, &mut count) };
    steps.expect(
        "an array with room for 0 nodes (not documented; NVIDIA 580's code)",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    destroy(std::ptr::null_mut(), g);
    steps.finish(&driver);
}

#[test]
fn get_proc_address_finds_every_hand_built_node_call_at_cuda_13() {
    let _shared = conformance::driver::shared_device();
    let Some(env) = env_or_skip() else { return };
    let mut steps = Steps::default();
    for name in [
        "cuGraphAddMemAllocNode",
        "cuGraphAddMemFreeNode",
        "cuGraphMemAllocNodeGetParams",
        "cuGraphMemFreeNodeGetParams",
        "cuDeviceGetGraphMemAttribute",
        "cuDeviceSetGraphMemAttribute",
        "cuDeviceGraphMemTrim",
        "cuGraphAddChildGraphNode",
        "cuGraphChildGraphNodeGetGraph",
        "cuGraphClone",
        "cuGraphAddMemcpyNode",
        "cuGraphMemcpyNodeGetParams",
        "cuGraphMemcpyNodeSetParams",
        "cuGraphExecMemcpyNodeSetParams",
    ] {
        expect_found_at_cuda_13(&mut steps, name);
    }
    steps.finish(&env.choice.kind.to_string());
}

/// Checks that cuGetProcAddress_v2 finds base name `name` for a CUDA 13 caller.
pub(crate) fn expect_found_at_cuda_13(steps: &mut Steps, name: &str) {
    let symbol = std::ffi::CString::new(name).expect("no NUL");
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    // SAFETY: valid out-pointers and a NUL-terminated name.
    let r = unsafe { sys::cuGetProcAddress_v2(symbol.as_ptr(), &mut pfn, 13000, 0, &mut status) };
    steps.check(
        &format!("cuGetProcAddress_v2({name}, 13000)"),
        r == CUresult::CUDA_SUCCESS && !pfn.is_null(),
        || format!("{r:?}, {status:?}"),
    );
}

#[test]
fn captured_copy_is_a_memcpy_node_whose_parameters_read_back_and_update() {
    let _alone = exclusive_device();
    let Some((ctx, s, driver)) = setup() else {
        return;
    };
    let mut steps = Steps::default();
    let [a, b, c] = [(); 3].map(|_| zeroed(&ctx));
    a.write(&[4; WORDS * 4]).expect("a");
    c.write(&[6; WORDS * 4]).expect("c");
    steps.expect(
        "begin capture",
        crate::graphs::begin(&s),
        CUresult::CUDA_SUCCESS,
    );
    // SAFETY: live buffers of WORDS words and a live, capturing stream.
    let r = unsafe { sys::cuMemcpyDtoDAsync_v2(b.ptr(), a.ptr(), WORDS * 4, s.raw()) };
    steps.expect("captured cuMemcpyDtoDAsync", r, CUresult::CUDA_SUCCESS);
    let (r, g) = crate::graphs::end(&s);
    steps.expect("end capture", r, CUresult::CUDA_SUCCESS);
    let copy = nodes(g);
    steps.check(
        "one memcpy node",
        copy.len() == 1 && node_type(copy[0]) == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY,
        || format!("{} nodes", copy.len()),
    );
    check_copy_params(
        &mut steps,
        "it reads back the captured copy",
        copy[0],
        a.ptr(),
        b.ptr(),
    );
    let (r, exec) = instantiate(g);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    let from_c = copy_params(
        Side::device(c.ptr(), 0),
        Side::device(b.ptr(), 0),
        WORDS * 4,
        1,
    );
    // SAFETY: live executable graph and node; `from_c` outlives the call.
    let r = unsafe { sys::cuGraphExecMemcpyNodeSetParams(exec, copy[0], &from_c, ctx.raw()) };
    steps.expect(
        "cuGraphExecMemcpyNodeSetParams on the captured node",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the launch copied c",
        b.to_vec().expect("b").iter().all(|v| *v == 6),
        || "b is not c".into(),
    );
    destroy(exec, g);
    steps.finish(&driver);
}
