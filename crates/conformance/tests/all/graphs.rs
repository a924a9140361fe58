//! Stream capture and graphs: captured copies, fills, kernel launches and a fork/join through
//! events replay as a graph (and nothing runs while capturing); a graph built node by node runs
//! its kernels in dependency order, and a kernel-node parameter update on the executable graph
//! changes later launches only; operations a capturing stream cannot take fail and invalidate
//! the capture; cuStreamGetCaptureInfo gives the graph being built, which holds each captured
//! call as it is made and is the graph the capture ends with. Captures are thread-local and run
//! alone (NVIDIA forbids some calls from other threads during a global capture).

use std::ffi::c_void;
use std::sync::Arc;

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::{DeviceBuffer, PinnedBuffer};
use conformance::module::{Function, Module};
use conformance::stream::{Event, Stream};
use cudarc::driver::sys::{self, CUresult};

use crate::support::{Steps, clang_ptx, env_or_skip};

const THREAD_LOCAL: sys::CUstreamCaptureMode =
    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
pub(crate) const N: usize = 256;

pub(crate) fn begin(s: &Stream) -> CUresult {
    // SAFETY: a live stream of the bound context.
    unsafe { sys::cuStreamBeginCapture_v2(s.raw(), THREAD_LOCAL) }
}

pub(crate) fn end(s: &Stream) -> (CUresult, sys::CUgraph) {
    let mut g: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a live stream.
    let r = unsafe { sys::cuStreamEndCapture(s.raw(), &mut g) };
    (r, g)
}

fn capturing(s: &Stream) -> sys::CUstreamCaptureStatus {
    let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: valid out-pointer; a live stream.
    let r = unsafe { sys::cuStreamIsCapturing(s.raw(), &mut st) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuStreamIsCapturing");
    st
}

/// saxpy(n, a, x, y) as a kernel-node parameter list: the values and the pointer array.
pub(crate) struct SaxpyArgs {
    n: i32,
    a: f32,
    x: sys::CUdeviceptr,
    y: sys::CUdeviceptr,
    ptrs: [*mut c_void; 4],
}

impl SaxpyArgs {
    pub(crate) fn new(a: f32, x: sys::CUdeviceptr, y: sys::CUdeviceptr) -> Box<SaxpyArgs> {
        let mut b = Box::new(SaxpyArgs {
            n: N as i32,
            a,
            x,
            y,
            ptrs: [std::ptr::null_mut(); 4],
        });
        b.ptrs = [
            (&raw mut b.n).cast(),
            (&raw mut b.a).cast(),
            (&raw mut b.x).cast(),
            (&raw mut b.y).cast(),
        ];
        b
    }

    pub(crate) fn node(&mut self, f: &Function) -> sys::CUDA_KERNEL_NODE_PARAMS {
        // SAFETY: an all-zero CUDA_KERNEL_NODE_PARAMS is valid (NULL pointers, zero sizes).
        let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
        p.func = f.raw();
        (p.gridDimX, p.gridDimY, p.gridDimZ) = (N.div_ceil(64) as u32, 1, 1);
        (p.blockDimX, p.blockDimY, p.blockDimZ) = (64, 1, 1);
        p.kernelParams = self.ptrs.as_mut_ptr();
        p
    }
}

/// Destroys an executable graph and its graph (the stream it ran on is idle), each expected to
/// succeed.
fn destroy(steps: &mut Steps, exec: sys::CUgraphExec, graph: sys::CUgraph) {
    // SAFETY: live handles, destroyed once each; nothing runs them any more.
    let (e, g) = unsafe { (sys::cuGraphExecDestroy(exec), sys::cuGraphDestroy(graph)) };
    steps.expect("cuGraphExecDestroy", e, CUresult::CUDA_SUCCESS);
    steps.expect("cuGraphDestroy", g, CUresult::CUDA_SUCCESS);
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Setup {
    ctx: Arc<Context>,
    saxpy: Function,
}

fn setup() -> Option<(Setup, String)> {
    let env = env_or_skip()?;
    let ctx = Context::primary(env).expect("retain");
    let module = Module::load_ptx(&ctx, &clang_ptx("saxpy")).expect("load saxpy");
    let saxpy = module.function("saxpy").expect("saxpy");
    Some((Setup { ctx, saxpy }, env.choice.kind.to_string()))
}

#[test]
fn captured_copies_fills_kernels_and_a_fork_join_replay_as_a_graph() {
    let _alone = exclusive_device();
    let Some((t, driver)) = setup() else { return };
    let mut steps = Steps::default();
    let (s, side) = (
        Stream::new(&t.ctx).expect("stream"),
        Stream::new(&t.ctx).expect("stream"),
    );
    let (fork, join) = (
        Event::new(&t.ctx).expect("event"),
        Event::new(&t.ctx).expect("event"),
    );
    let host_x = PinnedBuffer::alloc(&t.ctx, N * 4).expect("pinned");
    let host_y = PinnedBuffer::alloc(&t.ctx, N * 4).expect("pinned");
    let x = DeviceBuffer::alloc(&t.ctx, N * 4).expect("x");
    let y = DeviceBuffer::alloc(&t.ctx, N * 4).expect("y");
    let z = DeviceBuffer::alloc(&t.ctx, 64).expect("z");
    let xs: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let write_x = |v: &[f32]| {
        // SAFETY: the pinned buffer holds N floats and no copy is in flight.
        unsafe { std::ptr::copy_nonoverlapping(bytes(v).as_ptr(), host_x.ptr(), N * 4) }
    };
    write_x(&xs);
    z.fill(0).expect("clear z");

    steps.expect("cuStreamBeginCapture", begin(&s), CUresult::CUDA_SUCCESS);
    steps.check(
        "the stream is capturing",
        capturing(&s) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        || format!("{:?}", capturing(&s)),
    );
    let mut args = SaxpyArgs::new(3.0, x.ptr(), y.ptr());
    // SAFETY: live buffers of the sizes given, a live stream, events and function; `args`
    // outlives the launch call.
    let r = unsafe {
        [
            sys::cuMemcpyHtoDAsync_v2(x.ptr(), host_x.ptr().cast(), N * 4, s.raw()),
            sys::cuMemsetD32Async(y.ptr(), 1.0f32.to_bits(), N, s.raw()),
            sys::cuEventRecord(fork.raw(), s.raw()),
            sys::cuStreamWaitEvent(side.raw(), fork.raw(), 0),
            sys::cuMemsetD8Async(z.ptr(), 7, 64, side.raw()),
            sys::cuEventRecord(join.raw(), side.raw()),
            sys::cuStreamWaitEvent(s.raw(), join.raw(), 0),
            sys::cuLaunchKernel(
                t.saxpy.raw(),
                4,
                1,
                1,
                64,
                1,
                1,
                0,
                s.raw(),
                args.ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            ),
            sys::cuMemcpyDtoHAsync_v2(host_y.ptr().cast(), y.ptr(), N * 4, s.raw()),
        ]
    };
    steps.check(
        "every captured call succeeds",
        r.iter().all(|r| *r == CUresult::CUDA_SUCCESS),
        || format!("{r:?}"),
    );
    let (r, graph) = end(&s);
    steps.expect("cuStreamEndCapture", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "capture over",
        capturing(&s) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        || "still capturing".into(),
    );
    steps.check(
        "nothing ran while capturing",
        host_y.read().iter().all(|b| *b == 0) && z.to_vec().expect("z").iter().all(|b| *b == 0),
        || "a captured copy or fill ran".into(),
    );

    let mut count = 0usize;
    // SAFETY: valid out-pointer; NULL nodes asks for the count only.
    let r = unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) };
    steps.expect("cuGraphGetNodes", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "five nodes: 2 copies, 2 fills, 1 kernel (events make edges, not nodes)",
        count == 5,
        || format!("{count} nodes"),
    );

    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer and a live graph.
    let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
    steps.expect("cuGraphInstantiateWithFlags", r, CUresult::CUDA_SUCCESS);
    // SAFETY: live executable graph and stream.
    unsafe {
        steps.expect(
            "cuGraphUpload",
            sys::cuGraphUpload(exec, s.raw()),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuGraphLaunch",
            sys::cuGraphLaunch(exec, s.raw()),
            CUresult::CUDA_SUCCESS,
        );
    }
    s.synchronize().expect("sync");
    let want = |k: f32| (0..N).map(|i| k * i as f32 + 1.0).collect::<Vec<f32>>();
    steps.check(
        "y = 3x + 1 after the first launch",
        f32s(&host_y.read()) == want(3.0),
        || format!("{:?}", &f32s(&host_y.read())[..4]),
    );
    steps.check(
        "the forked fill ran",
        z.to_vec().expect("z").iter().all(|b| *b == 7),
        || "z not 7".into(),
    );
    // The copy node reads the host buffer when the graph runs.
    write_x(&xs.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    // SAFETY: live executable graph and stream.
    unsafe { sys::cuGraphLaunch(exec, s.raw()) };
    s.synchronize().expect("sync");
    steps.check(
        "a second launch reads x again: y = 6i + 1",
        f32s(&host_y.read()) == want(6.0),
        || format!("{:?}", &f32s(&host_y.read())[..4]),
    );
    destroy(&mut steps, exec, graph);
    steps.finish(&driver);
}

#[test]
fn graph_built_by_hand_runs_in_dependency_order_and_exec_updates_change_later_launches() {
    let _alone = exclusive_device();
    let Some((t, driver)) = setup() else { return };
    let mut steps = Steps::default();
    let s = Stream::new(&t.ctx).expect("stream");
    let x = DeviceBuffer::alloc(&t.ctx, N * 4).expect("x");
    let y = DeviceBuffer::alloc(&t.ctx, N * 4).expect("y");
    x.write(&bytes(&vec![1.0; N])).expect("x");
    y.write(&bytes(&vec![0.0; N])).expect("y");
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    steps.expect(
        "cuGraphCreate",
        unsafe { sys::cuGraphCreate(&mut graph, 0) },
        CUresult::CUDA_SUCCESS,
    );
    // Two saxpy nodes on y, second after the first: y = 2x + 0, then y = 10x + y.
    let (mut first, mut second) = (
        SaxpyArgs::new(2.0, x.ptr(), y.ptr()),
        SaxpyArgs::new(10.0, x.ptr(), y.ptr()),
    );
    let (mut a, mut b): (sys::CUgraphNode, sys::CUgraphNode) =
        (std::ptr::null_mut(), std::ptr::null_mut());
    let (pa, pb) = (first.node(&t.saxpy), second.node(&t.saxpy));
    // SAFETY: valid out-pointers, live graph, parameter structs and arrays live across the calls.
    unsafe {
        steps.expect(
            "cuGraphAddKernelNode(a)",
            sys::cuGraphAddKernelNode_v2(&mut a, graph, std::ptr::null(), 0, &pa),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuGraphAddKernelNode(b)",
            sys::cuGraphAddKernelNode_v2(&mut b, graph, std::ptr::null(), 0, &pb),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuGraphAddDependencies(a → b)",
            sys::cuGraphAddDependencies(graph, &a, &b, 1),
            CUresult::CUDA_SUCCESS,
        );
        let mut kind = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        steps.expect(
            "cuGraphNodeGetType",
            sys::cuGraphNodeGetType(b, &mut kind),
            CUresult::CUDA_SUCCESS,
        );
        steps.check(
            "b is a kernel node",
            kind == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL,
            || format!("{kind:?}"),
        );
    }
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer, live graph and stream.
    unsafe {
        steps.expect(
            "cuGraphInstantiateWithFlags",
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuGraphLaunch",
            sys::cuGraphLaunch(exec, s.raw()),
            CUresult::CUDA_SUCCESS,
        );
    }
    s.synchronize().expect("sync");
    let y_now = || f32s(&y.to_vec().expect("y"));
    steps.check(
        "a then b: y = 10x + 2x = 12",
        y_now().iter().all(|v| *v == 12.0),
        || format!("{:?}", &y_now()[..4]),
    );

    // Update b in the executable graph: a = 100; the graph itself keeps a = 10.
    let mut updated = SaxpyArgs::new(100.0, x.ptr(), y.ptr());
    let pu = updated.node(&t.saxpy);
    // SAFETY: live handles; `pu` and its arrays live across the calls.
    unsafe {
        steps.expect(
            "cuGraphExecKernelNodeSetParams",
            sys::cuGraphExecKernelNodeSetParams_v2(exec, b, &pu),
            CUresult::CUDA_SUCCESS,
        );
        sys::cuGraphLaunch(exec, s.raw());
    }
    s.synchronize().expect("sync");
    steps.check(
        "the update applies to later launches: 12 + 2 + 100 = 114",
        y_now().iter().all(|v| *v == 114.0),
        || format!("{:?}", &y_now()[..4]),
    );
    let mut fresh: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer, live graph and stream.
    unsafe {
        sys::cuGraphInstantiateWithFlags(&mut fresh, graph, 0);
        sys::cuGraphLaunch(fresh, s.raw());
    }
    s.synchronize().expect("sync");
    steps.check(
        "the graph itself was not changed: 114 + 2 + 10 = 126",
        y_now().iter().all(|v| *v == 126.0),
        || format!("{:?}", &y_now()[..4]),
    );
    // SAFETY: destroyed once each after the stream is idle.
    unsafe {
        sys::cuGraphExecDestroy(fresh);
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
    }
    steps.finish(&driver);
}

#[test]
fn capture_refuses_what_a_capturing_stream_cannot_do() {
    let _alone = exclusive_device();
    let Some((t, driver)) = setup() else { return };
    let mut steps = Steps::default();
    let (s, side) = (
        Stream::new(&t.ctx).expect("stream"),
        Stream::new(&t.ctx).expect("stream"),
    );
    let legacy = Stream::legacy_default(&t.ctx);
    steps.expect(
        "capture of the legacy default stream",
        begin(&legacy),
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    );

    steps.expect("cuStreamBeginCapture", begin(&s), CUresult::CUDA_SUCCESS);
    // SAFETY: a live stream.
    let r = unsafe { sys::cuStreamSynchronize(s.raw()) };
    steps.expect(
        "cuStreamSynchronize while capturing",
        r,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    );
    steps.check(
        "the capture is invalidated",
        capturing(&s) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED,
        || format!("{:?}", capturing(&s)),
    );
    let (r, g) = end(&s);
    steps.expect(
        "cuStreamEndCapture of an invalidated capture",
        r,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    );
    steps.check("no graph", g.is_null(), || format!("{g:?}"));

    // A stream forked into the capture and never joined back.
    let fork = Event::new(&t.ctx).expect("event");
    let z = DeviceBuffer::alloc(&t.ctx, 64).expect("z");
    steps.expect(
        "cuStreamBeginCapture again",
        begin(&s),
        CUresult::CUDA_SUCCESS,
    );
    // SAFETY: live event, streams and buffer.
    unsafe {
        sys::cuEventRecord(fork.raw(), s.raw());
        sys::cuStreamWaitEvent(side.raw(), fork.raw(), 0);
        sys::cuMemsetD8Async(z.ptr(), 1, 64, side.raw());
    }
    steps.check(
        "the forked stream is capturing",
        capturing(&side) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        || format!("{:?}", capturing(&side)),
    );
    let (r, _) = end(&s);
    steps.expect(
        "cuStreamEndCapture with an unjoined fork",
        r,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
    );
    steps.check(
        "no stream is capturing afterwards",
        capturing(&s) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            && capturing(&side) == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        || "still capturing".into(),
    );
    steps.finish(&driver);
}

/// cuStreamGetCaptureInfo_v3 on `s`: (result, status, graph being built, dependency nodes).
fn capture_info(
    s: &Stream,
) -> (
    CUresult,
    sys::CUstreamCaptureStatus,
    sys::CUgraph,
    Vec<sys::CUgraphNode>,
) {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let (mut id, mut graph, mut count) = (0u64, std::ptr::null_mut(), 0usize);
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
    // SAFETY: valid out-pointers; a live stream.
    let r = unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            s.raw(),
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut count,
        )
    };
    let deps = if deps.is_null() || count == 0 {
        Vec::new()
    } else {
        // SAFETY: the driver's array of `count` nodes, valid until the capture next changes.
        unsafe { std::slice::from_raw_parts(deps, count) }.to_vec()
    };
    (r, status, graph, deps)
}

/// The nodes of `graph`, in the driver's order.
fn graph_nodes(graph: sys::CUgraph) -> Result<Vec<sys::CUgraphNode>, CUresult> {
    let mut count = 0usize;
    // SAFETY: valid out-pointer; NULL nodes asks for the count only.
    let r = unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) };
    if r != CUresult::CUDA_SUCCESS {
        return Err(r);
    }
    if count == 0 {
        // An array with room for no node is INVALID_VALUE (NVIDIA's driver 580).
        return Ok(Vec::new());
    }
    let mut nodes = vec![std::ptr::null_mut(); count];
    // SAFETY: room for `count` nodes.
    let r = unsafe { sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) };
    if r != CUresult::CUDA_SUCCESS {
        return Err(r);
    }
    nodes.truncate(count);
    Ok(nodes)
}

#[test]
fn capture_info_gives_the_graph_being_built_which_grows_with_each_captured_call() {
    let _alone = exclusive_device();
    let Some((t, driver)) = setup() else { return };
    let mut steps = Steps::default();
    let s = Stream::new(&t.ctx).expect("stream");
    let z = DeviceBuffer::alloc(&t.ctx, 64).expect("z");
    z.fill(0).expect("clear z");

    steps.expect("cuStreamBeginCapture", begin(&s), CUresult::CUDA_SUCCESS);
    let (r, status, building, deps) = capture_info(&s);
    steps.expect("cuStreamGetCaptureInfo_v3", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "capturing, into a graph, with nothing to depend on yet",
        status == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
            && !building.is_null()
            && deps.is_empty(),
        || format!("{status:?} {building:?} {deps:?}"),
    );
    steps.check(
        "the graph being built starts empty",
        graph_nodes(building) == Ok(Vec::new()),
        || format!("{:?}", graph_nodes(building)),
    );

    let mut latest = None;
    for (count, value) in [(1, 1u8), (2, 2)] {
        // SAFETY: a live buffer of 64 bytes and a live stream.
        let r = unsafe { sys::cuMemsetD8Async(z.ptr(), value, 64, s.raw()) };
        steps.expect("a captured fill", r, CUresult::CUDA_SUCCESS);
        let (r, _, graph, deps) = capture_info(&s);
        steps.expect("cuStreamGetCaptureInfo_v3 again", r, CUresult::CUDA_SUCCESS);
        steps.check("the same graph", graph == building, || {
            format!("{graph:?} then {building:?}")
        });
        let nodes = graph_nodes(building);
        latest = deps.first().copied();
        steps.check(
            "the graph holds each fill so far, the latest being what comes next depends on",
            nodes
                .as_ref()
                .is_ok_and(|n| n.len() == count && deps.len() == 1 && n.contains(&deps[0])),
            || format!("{nodes:?} deps {deps:?}"),
        );
    }
    let mut kind = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: valid out-pointer; a node of the graph being built (or NULL, refused).
    let r = unsafe { sys::cuGraphNodeGetType(latest.unwrap_or(std::ptr::null_mut()), &mut kind) };
    steps.expect(
        "cuGraphNodeGetType of a captured node",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.check(
        "a captured fill is a memset node",
        kind == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET,
        || format!("{kind:?}"),
    );

    let (r, graph) = end(&s);
    steps.expect("cuStreamEndCapture", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "the capture ends with the graph it built",
        graph == building,
        || format!("{graph:?}, built {building:?}"),
    );
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer and a live graph.
    let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
    steps.expect("cuGraphInstantiateWithFlags", r, CUresult::CUDA_SUCCESS);
    // SAFETY: a live executable graph and stream.
    let r = unsafe { sys::cuGraphLaunch(exec, s.raw()) };
    steps.expect("cuGraphLaunch", r, CUresult::CUDA_SUCCESS);
    s.synchronize().expect("sync");
    steps.check(
        "the fills ran in order",
        z.to_vec().expect("z").iter().all(|b| *b == 2),
        || "z not 2".into(),
    );
    destroy(&mut steps, exec, graph);
    steps.finish(&driver);
}
