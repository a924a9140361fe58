//! Graph memory nodes built by hand: cuGraphAddMemAllocNode gives an address at once, which
//! nodes between the allocation and its free use on every launch; both nodes give their
//! parameters back; a free node takes only an address an allocation node gave, once; a graph
//! with memory nodes is instantiated once at a time and is neither cloned nor embedded as a
//! child; and cuDeviceGetGraphMemAttribute counts graph memory, whose high watermarks reset to
//! 0. Where NVIDIA documents "an error" without its code, the code expected here is a guess
//! that the H200 run settles (docs/SOFTCUDA.md says which).

use conformance::context::Context;
use conformance::driver::exclusive_device;
use conformance::memory::{DeviceBuffer, PinnedBuffer};
use conformance::stream::Stream;
use cudarc::driver::sys::{self, CUresult};

use crate::graph_nodes::{
    Side, add_child, add_copy, add_fill, copy_params, destroy, instantiate, new_graph, node_type,
    run,
};
use crate::support::{Steps, env_or_skip};

const BYTES: usize = 4096;

/// Parameters of a `bytes`-byte allocation on `dev`.
pub(crate) fn alloc_params(dev: sys::CUdevice, bytes: usize) -> sys::CUDA_MEM_ALLOC_NODE_PARAMS {
    // SAFETY: an all-zero CUDA_MEM_ALLOC_NODE_PARAMS is plain data (no access descriptors, zero
    // enums are defined values); the fields that matter are set below.
    let mut p: sys::CUDA_MEM_ALLOC_NODE_PARAMS = unsafe { std::mem::zeroed() };
    p.poolProps.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = dev;
    p.bytesize = bytes;
    p
}

fn add_alloc(
    g: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    p: &mut sys::CUDA_MEM_ALLOC_NODE_PARAMS,
) -> (CUresult, sys::CUgraphNode) {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer and parameters; `deps` holds its length of nodes.
    let r = unsafe { sys::cuGraphAddMemAllocNode(&mut n, g, deps.as_ptr(), deps.len(), p) };
    (r, n)
}

fn add_free(
    g: sys::CUgraph,
    deps: &[sys::CUgraphNode],
    ptr: sys::CUdeviceptr,
) -> (CUresult, sys::CUgraphNode) {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `deps` holds its length of nodes; the driver checks `ptr`.
    let r = unsafe { sys::cuGraphAddMemFreeNode(&mut n, g, deps.as_ptr(), deps.len(), ptr) };
    (r, n)
}

/// A graph of one `bytes`-byte allocation on the context's device and its free: (graph,
/// address, alloc node, free node).
pub(crate) fn alloc_then_free(
    ctx: &Context,
    bytes: usize,
    steps: &mut Steps,
) -> (
    sys::CUgraph,
    sys::CUdeviceptr,
    sys::CUgraphNode,
    sys::CUgraphNode,
) {
    let g = new_graph();
    let mut p = alloc_params(ctx.device(), bytes);
    let (r, alloc) = add_alloc(g, &[], &mut p);
    steps.expect("cuGraphAddMemAllocNode", r, CUresult::CUDA_SUCCESS);
    let (r, free) = add_free(g, &[alloc], p.dptr);
    steps.expect("cuGraphAddMemFreeNode", r, CUresult::CUDA_SUCCESS);
    (g, p.dptr, alloc, free)
}

type Attr = sys::CUgraphMem_attribute;

fn get(dev: sys::CUdevice, attr: Attr) -> (CUresult, u64) {
    let mut v = u64::MAX;
    // SAFETY: every graph-memory attribute is a cuuint64_t; `v` is one.
    let r = unsafe { sys::cuDeviceGetGraphMemAttribute(dev, attr, (&raw mut v).cast()) };
    (r, v)
}

fn set(dev: sys::CUdevice, attr: Attr, mut v: u64) -> CUresult {
    // SAFETY: every graph-memory attribute is a cuuint64_t; `v` is one.
    unsafe { sys::cuDeviceSetGraphMemAttribute(dev, attr, (&raw mut v).cast()) }
}

fn trim(dev: sys::CUdevice) -> CUresult {
    // SAFETY: the driver validates the device.
    unsafe { sys::cuDeviceGraphMemTrim(dev) }
}

#[test]
fn nodes_between_a_hand_built_alloc_and_free_use_its_memory_on_every_launch() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let host = PinnedBuffer::alloc(&ctx, BYTES).expect("pinned");
    let mut steps = Steps::default();
    let g = new_graph();
    let mut p = alloc_params(ctx.device(), BYTES);
    let (r, alloc) = add_alloc(g, &[], &mut p);
    steps.expect("cuGraphAddMemAllocNode", r, CUresult::CUDA_SUCCESS);
    steps.check("the address is given at add", p.dptr != 0, || {
        "dptr is 0".into()
    });
    let (r1, fill) = add_fill(g, &[alloc], p.dptr, 0x5a5a_5a5a, BYTES / 4, &ctx);
    let (r2, down) = add_copy(
        g,
        &[fill],
        &copy_params(Side::device(p.dptr, 0), Side::host(host.ptr()), BYTES, 1),
        &ctx,
    );
    let (r3, _) = add_free(g, &[down], p.dptr);
    steps.check(
        "fill, copy and free nodes on the allocation",
        [r1, r2, r3].iter().all(|r| *r == CUresult::CUDA_SUCCESS),
        || format!("{:?}", [r1, r2, r3]),
    );
    let (r, exec) = instantiate(g);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    for round in 0..2 {
        // SAFETY: the pinned buffer is not in use by any copy.
        unsafe { std::ptr::write_bytes(host.ptr(), 0, BYTES) };
        steps.expect(
            &format!("launch #{round}"),
            run(exec, &s),
            CUresult::CUDA_SUCCESS,
        );
        let got = host.read();
        steps.check(
            &format!("launch #{round} filled the graph's memory"),
            got.iter().all(|&b| b == 0x5a),
            || format!("{:?}", &got[..8]),
        );
    }
    destroy(exec, g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn memory_nodes_give_back_their_parameters_and_types() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let (g, dptr, alloc, free) = alloc_then_free(&ctx, BYTES, &mut steps);
    steps.check(
        "types MEM_ALLOC and MEM_FREE",
        node_type(alloc) == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_ALLOC
            && node_type(free) == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_FREE,
        || format!("{:?} {:?}", node_type(alloc), node_type(free)),
    );
    let mut got = alloc_params(0, 0);
    // SAFETY: valid out-pointer and node.
    let r = unsafe { sys::cuGraphMemAllocNodeGetParams(alloc, &mut got) };
    steps.expect("cuGraphMemAllocNodeGetParams", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "address, size and device read back",
        got.dptr == dptr
            && got.bytesize == BYTES
            && got.poolProps.location.id == ctx.device()
            && got.poolProps.location.type_ == sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE
            && got.accessDescCount == 0,
        || {
            format!(
                "dptr {:#x} bytes {} device {} descs {}",
                got.dptr, got.bytesize, got.poolProps.location.id, got.accessDescCount
            )
        },
    );
    let mut freed: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer and node.
    let r = unsafe { sys::cuGraphMemFreeNodeGetParams(free, &mut freed) };
    steps.expect("cuGraphMemFreeNodeGetParams", r, CUresult::CUDA_SUCCESS);
    steps.check("the free node names the allocation", freed == dptr, || {
        format!("{freed:#x}")
    });
    // SAFETY: valid out-pointer; a node of another type.
    let r = unsafe { sys::cuGraphMemFreeNodeGetParams(alloc, &mut freed) };
    steps.expect(
        "cuGraphMemFreeNodeGetParams of an alloc node",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    destroy(std::ptr::null_mut(), g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn free_node_takes_only_an_address_an_alloc_node_gave_and_only_once() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let plain = DeviceBuffer::alloc(&ctx, BYTES).expect("cuMemAlloc");
    let g = new_graph();
    let mut p = alloc_params(ctx.device(), BYTES);
    let (r, alloc) = add_alloc(g, &[], &mut p);
    steps.expect("cuGraphAddMemAllocNode", r, CUresult::CUDA_SUCCESS);
    let (r, _) = add_free(g, &[alloc], plain.ptr());
    steps.expect(
        "free of cuMemAlloc memory",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let (r, _) = add_free(g, &[alloc], p.dptr + 256);
    steps.expect(
        "free of an interior address",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let (r, free) = add_free(g, &[alloc], p.dptr);
    steps.expect("the free", r, CUresult::CUDA_SUCCESS);
    let (r, _) = add_free(g, &[free], p.dptr);
    steps.expect(
        "a second free in the graph",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let other = new_graph();
    let (r, _) = add_free(other, &[], p.dptr);
    steps.expect(
        "a free in another graph of memory freed in its own",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let mut bad = alloc_params(ctx.device(), BYTES);
    bad.poolProps.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID;
    let (r, _) = add_alloc(g, &[], &mut bad);
    steps.expect(
        "an allocation at an invalid location",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    destroy(std::ptr::null_mut(), other);
    destroy(std::ptr::null_mut(), g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn graph_with_memory_nodes_is_instantiated_once_at_a_time_and_never_cloned_or_embedded() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let mut steps = Steps::default();
    let (g, ..) = alloc_then_free(&ctx, BYTES, &mut steps);
    let (r, first) = instantiate(g);
    steps.expect("first instantiation", r, CUresult::CUDA_SUCCESS);
    let (r, second) = instantiate(g);
    steps.expect(
        "second instantiation while the first lives (not documented; NVIDIA 580's code)",
        r,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
    );
    destroy(second, std::ptr::null_mut());
    destroy(first, std::ptr::null_mut());
    let (r, again) = instantiate(g);
    steps.expect(
        "instantiation after the first is destroyed",
        r,
        CUresult::CUDA_SUCCESS,
    );
    destroy(again, std::ptr::null_mut());
    let mut copy: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer and graph.
    let r = unsafe { sys::cuGraphClone(&mut copy, g) };
    steps.expect(
        "cuGraphClone (not documented; NVIDIA 580's code)",
        r,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
    );
    let parent = new_graph();
    let (r, _) = add_child(parent, g);
    steps.expect(
        "as a child graph (documented: INVALID_VALUE; NVIDIA 580's code)",
        r,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
    );
    destroy(std::ptr::null_mut(), parent);
    destroy(std::ptr::null_mut(), g);
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn graph_memory_attributes_count_graph_allocations_and_reset_high_watermarks_to_zero() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let dev = ctx.device();
    let s = Stream::new(&ctx).expect("stream");
    let mut steps = Steps::default();
    const BIG: usize = 8 << 20;
    let (g, ..) = alloc_then_free(&ctx, BIG, &mut steps);
    let (r, exec) = instantiate(g);
    steps.expect("instantiate", r, CUresult::CUDA_SUCCESS);
    steps.expect("launch", run(exec, &s), CUresult::CUDA_SUCCESS);
    let [used, used_high, reserved, reserved_high] = [
        Attr::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
        Attr::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
        Attr::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
        Attr::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
    ]
    .map(|a| {
        let (r, v) = get(dev, a);
        steps.expect(
            &format!("cuDeviceGetGraphMemAttribute({a:?})"),
            r,
            CUresult::CUDA_SUCCESS,
        );
        v
    });
    steps.check(
        "after a launch the high watermarks cover the allocation, reserved covers used",
        used_high >= BIG as u64 && reserved_high >= BIG as u64 && reserved >= used,
        || format!("used {used} (high {used_high}), reserved {reserved} (high {reserved_high})"),
    );
    destroy(exec, g);
    steps.expect("cuDeviceGraphMemTrim", trim(dev), CUresult::CUDA_SUCCESS);
    for a in [
        Attr::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT,
        Attr::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
    ] {
        let (r, v) = get(dev, a);
        steps.check(
            &format!("{a:?} is 0 once the graph is gone and memory trimmed"),
            r == CUresult::CUDA_SUCCESS && v == 0,
            || format!("{r:?} {v}"),
        );
    }
    for a in [
        Attr::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
        Attr::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
    ] {
        steps.expect(
            &format!("reset {a:?} to 0"),
            set(dev, a, 0),
            CUresult::CUDA_SUCCESS,
        );
        let (r, v) = get(dev, a);
        steps.check(
            &format!("{a:?} reads 0 after the reset"),
            r == CUresult::CUDA_SUCCESS && v == 0,
            || format!("{r:?} {v}"),
        );
        steps.expect(
            &format!("set {a:?} to a value other than 0"),
            set(dev, a, 5),
            CUresult::CUDA_ERROR_INVALID_VALUE,
        );
    }
    steps.expect(
        "set USED_MEM_CURRENT",
        set(dev, Attr::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, 0),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let (r, _) = get(-1, Attr::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    steps.expect("device -1", r, CUresult::CUDA_ERROR_INVALID_DEVICE);
    steps.finish(&env.choice.kind.to_string());
}
