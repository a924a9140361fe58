//! Stream-ordered allocation and memory pools: memory from cuMemAllocAsync is usable by work
//! ordered after it (a kernel included) and freed in stream order; memory freed on one stream is
//! allocated again on another stream that waits on an event; a second free, or a pointer no
//! allocator handed out, is `CUDA_ERROR_INVALID_VALUE`; a pool's attributes count its used and
//! reserved memory (which cuMemGetInfo counts too), the release threshold keeps freed memory
//! reserved until cuMemPoolTrimTo; cuDeviceSetMemPool changes the pool cuMemAllocAsync uses;
//! and a captured allocation and free become graph mem-alloc and mem-free nodes.

use std::ffi::c_void;
use std::sync::Arc;

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use conformance::memory::PinnedBuffer;
use conformance::module::Module;
use conformance::stream::{Event, KernelArg, Stream};
use cudarc::driver::sys::{self, CUresult};

use crate::graphs::{begin, end};
use crate::support::{Steps, check_all_f32, clang_ptx, env_or_skip, free_bytes};

const MIB: usize = 1 << 20;

fn alloc_async(bytes: usize, s: &Stream) -> (CUresult, sys::CUdeviceptr) {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer; the driver validates the stream.
    let r = unsafe { sys::cuMemAllocAsync(&mut p, bytes, s.raw()) };
    (r, p)
}

fn alloc_from(pool: sys::CUmemoryPool, bytes: usize, s: &Stream) -> (CUresult, sys::CUdeviceptr) {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer; the driver validates the pool and the stream.
    let r = unsafe { sys::cuMemAllocFromPoolAsync(&mut p, bytes, pool, s.raw()) };
    (r, p)
}

fn free_async(p: sys::CUdeviceptr, s: &Stream) -> CUresult {
    // SAFETY: the driver validates the pointer (bad ones on purpose) and the stream.
    unsafe { sys::cuMemFreeAsync(p, s.raw()) }
}

fn memset_async(p: sys::CUdeviceptr, value: u8, bytes: usize, s: &Stream) -> CUresult {
    // SAFETY: the driver validates the range and the stream.
    unsafe { sys::cuMemsetD8Async(p, value, bytes, s.raw()) }
}

fn to_host(host: &PinnedBuffer, p: sys::CUdeviceptr, bytes: usize, s: &Stream) -> CUresult {
    assert!(bytes <= host.len(), "host buffer too small");
    // SAFETY: the pinned buffer holds `bytes` bytes and stays alive until the stream is
    // synchronized by the caller.
    unsafe { sys::cuMemcpyDtoHAsync_v2(host.ptr().cast(), p, bytes, s.raw()) }
}

fn sync(s: &Stream) -> CUresult {
    // SAFETY: a live stream.
    unsafe { sys::cuStreamSynchronize(s.raw()) }
}

type Attr = sys::CUmemPool_attribute;

fn get_u64(pool: sys::CUmemoryPool, attr: Attr) -> u64 {
    let mut v: u64 = u64::MAX;
    // SAFETY: the attribute is a cuuint64_t one and `v` is one.
    let r = unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&raw mut v).cast()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemPoolGetAttribute({attr:?})");
    v
}

fn set_u64(pool: sys::CUmemoryPool, attr: Attr, mut v: u64) -> CUresult {
    // SAFETY: the attribute is a cuuint64_t one and `v` is one.
    unsafe { sys::cuMemPoolSetAttribute(pool, attr, (&raw mut v).cast()) }
}

fn get_int(pool: sys::CUmemoryPool, attr: Attr) -> i32 {
    let mut v: i32 = -1;
    // SAFETY: the attribute is an int one and `v` is one.
    let r = unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&raw mut v).cast()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemPoolGetAttribute({attr:?})");
    v
}

fn set_int(pool: sys::CUmemoryPool, attr: Attr, mut v: i32) -> CUresult {
    // SAFETY: the attribute is an int one and `v` is one.
    unsafe { sys::cuMemPoolSetAttribute(pool, attr, (&raw mut v).cast()) }
}

/// A pool of device 0's memory with no size limit.
fn create_pool(dev: sys::CUdevice) -> sys::CUmemoryPool {
    // SAFETY: CUmemPoolProps is plain data; all-zero is its documented "no options" state.
    let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: valid out-pointer and properties.
    let r = unsafe { sys::cuMemPoolCreate(&mut pool, &props) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuMemPoolCreate");
    pool
}

fn destroy_pool(pool: sys::CUmemoryPool) -> CUresult {
    // SAFETY: the driver validates the handle.
    unsafe { sys::cuMemPoolDestroy(pool) }
}

fn default_pool(dev: sys::CUdevice) -> (CUresult, sys::CUmemoryPool) {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver validates the device.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, dev) };
    (r, pool)
}

fn current_pool(dev: sys::CUdevice) -> sys::CUmemoryPool {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: valid out-pointer and device.
    let r = unsafe { sys::cuDeviceGetMemPool(&mut pool, dev) };
    assert_eq!(r, CUresult::CUDA_SUCCESS, "cuDeviceGetMemPool");
    pool
}

#[test]
fn memory_pools_are_supported_and_each_device_has_a_default_pool() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let dev = ctx.device();
    let mut steps = Steps::default();
    let mut supported = -1;
    // SAFETY: valid out-pointer and device.
    let r = unsafe {
        sys::cuDeviceGetAttribute(
            &mut supported,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
            dev,
        )
    };
    steps.expect(
        "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.check("memory pools are supported", supported == 1, || {
        format!("{supported}")
    });
    let (r, pool) = default_pool(dev);
    steps.expect("cuDeviceGetDefaultMemPool", r, CUresult::CUDA_SUCCESS);
    steps.check("the default pool is a handle", !pool.is_null(), || {
        "NULL".into()
    });
    let (again_r, again) = default_pool(dev);
    steps.check(
        "the default pool is the same every time",
        again_r == r && again == pool,
        || format!("{again:?} vs {pool:?}"),
    );
    let (r, _) = default_pool(-1);
    steps.expect(
        "cuDeviceGetDefaultMemPool(-1)",
        r,
        CUresult::CUDA_ERROR_INVALID_DEVICE,
    );
    // SAFETY: a NULL out-pointer on purpose: the driver refuses it.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(std::ptr::null_mut(), dev) };
    steps.expect(
        "cuDeviceGetDefaultMemPool(NULL)",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.expect(
        "destroying the default pool",
        destroy_pool(pool),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let mut location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: dev,
    };
    let mut access = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    // SAFETY: valid out-pointer, pool and location.
    let r = unsafe { sys::cuMemPoolGetAccess(&mut access, pool, &mut location) };
    steps.expect("cuMemPoolGetAccess(own device)", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "a pool's own device has read-write access",
        access == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        || format!("{access:?}"),
    );
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn stream_ordered_memory_is_usable_by_later_work_and_a_kernel() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let module = Module::load_ptx(&ctx, &clang_ptx("saxpy")).expect("load saxpy");
    let saxpy = module.function("saxpy").expect("saxpy");
    let n = 1000usize;
    let mut steps = Steps::default();
    let (rx, x) = alloc_async(n * 4, &s);
    let (ry, y) = alloc_async(n * 4, &s);
    steps.expect("cuMemAllocAsync(x)", rx, CUresult::CUDA_SUCCESS);
    steps.expect("cuMemAllocAsync(y)", ry, CUresult::CUDA_SUCCESS);
    let host = PinnedBuffer::alloc(&ctx, n * 4).expect("pinned");
    if rx == CUresult::CUDA_SUCCESS && ry == CUresult::CUDA_SUCCESS {
        // 1.0f32 is 0x3f800000: x = 1.0 everywhere, y = 0.
        // SAFETY: both ranges were allocated above with n floats.
        let r = unsafe { sys::cuMemsetD32Async(x, 0x3f80_0000, n, s.raw()) };
        steps.expect("cuMemsetD32Async(x)", r, CUresult::CUDA_SUCCESS);
        steps.expect(
            "cuMemsetD8Async(y)",
            memset_async(y, 0, n * 4, &s),
            CUresult::CUDA_SUCCESS,
        );
        let args = [
            KernelArg::I32(n as i32),
            KernelArg::F32(2.5),
            KernelArg::Ptr(x),
            KernelArg::Ptr(y),
        ];
        s.launch(&saxpy, shape_1d(4, 128), &args)
            .expect("launch saxpy");
        steps.expect(
            "copy y back",
            to_host(&host, y, n * 4, &s),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuMemFreeAsync(x)",
            free_async(x, &s),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect(
            "cuMemFreeAsync(y)",
            free_async(y, &s),
            CUresult::CUDA_SUCCESS,
        );
        steps.expect("cuStreamSynchronize", sync(&s), CUresult::CUDA_SUCCESS);
        check_all_f32(&mut steps, "y = 2.5 * 1 + 0 everywhere", &host.read(), 2.5);
    }
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn freeing_twice_or_a_pointer_no_allocator_gave_is_invalid_value() {
    // Alone: once the first free has run, the device's default pool may hand the same address
    // to a test running beside this one, and NVIDIA's driver then takes the "double" free as
    // the free of that test's memory (at 16 test threads on the H100, session 47: this step got
    // CUDA_SUCCESS, and the other pool test's copy and free got CUDA_ERROR_INVALID_VALUE).
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let mut steps = Steps::default();
    let (r, p) = alloc_async(4096, &s);
    steps.expect("cuMemAllocAsync", r, CUresult::CUDA_SUCCESS);
    steps.expect(
        "free of an interior pointer",
        free_async(p + 256, &s),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.expect(
        "first cuMemFreeAsync",
        free_async(p, &s),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "second cuMemFreeAsync (not yet run)",
        free_async(p, &s),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.expect("cuStreamSynchronize", sync(&s), CUresult::CUDA_SUCCESS);
    steps.expect(
        "cuMemFreeAsync after the free ran",
        free_async(p, &s),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let stack = 0u64;
    let foreign = (&raw const stack).addr() as sys::CUdeviceptr;
    steps.expect(
        "cuMemFreeAsync of host stack memory",
        free_async(foreign, &s),
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    // Not an error on NVIDIA's driver (seen on the H200, driver 580).
    let (r, _) = alloc_async(0, &s);
    steps.expect("cuMemAllocAsync(0 bytes)", r, CUresult::CUDA_SUCCESS);
    // SAFETY: a NULL out-pointer on purpose: the driver refuses it.
    let r = unsafe { sys::cuMemAllocAsync(std::ptr::null_mut(), 64, s.raw()) };
    steps.expect(
        "cuMemAllocAsync(NULL)",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn memory_freed_on_one_stream_is_allocated_again_on_a_stream_that_waits_for_the_free() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let (s1, s2) = (
        Stream::new(&ctx).expect("s1"),
        Stream::new(&ctx).expect("s2"),
    );
    let (freed, handed) = (
        Event::new(&ctx).expect("event"),
        Event::new(&ctx).expect("event"),
    );
    let host = PinnedBuffer::alloc(&ctx, 2 * MIB).expect("pinned");
    let mut steps = Steps::default();

    // An allocation made on s1 and used then freed on s2 after s2 waits for s1.
    let (r, a) = alloc_async(MIB, &s1);
    steps.expect("cuMemAllocAsync on s1", r, CUresult::CUDA_SUCCESS);
    steps.expect(
        "fill on s1",
        memset_async(a, 0x11, MIB, &s1),
        CUresult::CUDA_SUCCESS,
    );
    handed.record(&s1).expect("record on s1");
    s2.wait(&handed).expect("s2 waits for s1");
    steps.expect(
        "copy on s2",
        to_host(&host, a, MIB, &s2),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "cuMemFreeAsync on s2",
        free_async(a, &s2),
        CUresult::CUDA_SUCCESS,
    );
    freed.record(&s2).expect("record the free");
    steps.expect("cuStreamSynchronize(s2)", sync(&s2), CUresult::CUDA_SUCCESS);
    let first = host.read();
    steps.check(
        "s2 saw s1's fill",
        first[..MIB].iter().all(|&b| b == 0x11),
        || format!("{:?}", &first[..8]),
    );

    // s1 waits for the free on s2; what it allocates then holds its own data.
    s1.wait(&freed).expect("s1 waits for the free");
    let (r, b) = alloc_async(MIB, &s1);
    steps.expect(
        "cuMemAllocAsync on s1 after the free",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.expect(
        "fill",
        memset_async(b, 0x22, MIB, &s1),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect("copy", to_host(&host, b, MIB, &s1), CUresult::CUDA_SUCCESS);
    steps.expect("free", free_async(b, &s1), CUresult::CUDA_SUCCESS);
    steps.expect("cuStreamSynchronize(s1)", sync(&s1), CUresult::CUDA_SUCCESS);
    let second = host.read();
    steps.check(
        "the second allocation holds its own fill",
        second[..MIB].iter().all(|&b| b == 0x22),
        || format!("{:?}", &second[..8]),
    );
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn pool_attributes_count_use_and_trim_gives_reserved_memory_back() {
    // Alone: the test reads cuMemGetInfo, which other tests' allocations would move.
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let pool = create_pool(ctx.device());
    let mut steps = Steps::default();
    let size = 64 * MIB;
    let counter = |steps: &mut Steps, step: &str, attr: Attr, ok: &dyn Fn(u64) -> bool| {
        let v = get_u64(pool, attr);
        steps.check(step, ok(v), || format!("{attr:?} = {v}"));
        v
    };

    for (attr, name) in [
        (
            Attr::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
            "follow events",
        ),
        (
            Attr::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
            "opportunistic",
        ),
        (
            Attr::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            "internal dependencies",
        ),
    ] {
        let before = get_int(pool, attr);
        let r = set_int(pool, attr, 0);
        steps.expect(&format!("turning {name} off"), r, CUresult::CUDA_SUCCESS);
        let after = get_int(pool, attr);
        steps.check(
            &format!("reuse flag {name}: on, then off"),
            (before, after) == (1, 0),
            || format!("{before}, then {after}"),
        );
    }
    counter(
        &mut steps,
        "release threshold starts at 0",
        Attr::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
        &|v| v == 0,
    );
    // With threshold 0, a synchronisation gives freed memory back.
    let (r, p) = alloc_from(pool, size, &s);
    steps.expect("cuMemAllocFromPoolAsync", r, CUresult::CUDA_SUCCESS);
    steps.expect("free", free_async(p, &s), CUresult::CUDA_SUCCESS);
    steps.expect("synchronize", sync(&s), CUresult::CUDA_SUCCESS);
    let reserved = Attr::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT;
    counter(
        &mut steps,
        "threshold 0: nothing stays reserved after a sync",
        reserved,
        &|v| v == 0,
    );

    let r = set_u64(pool, Attr::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, u64::MAX);
    steps.expect("set release threshold", r, CUresult::CUDA_SUCCESS);
    let free_before = free_bytes();
    let (r, p) = alloc_from(pool, size, &s);
    steps.expect(
        "cuMemAllocFromPoolAsync (64 MiB)",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.expect("synchronize", sync(&s), CUresult::CUDA_SUCCESS);
    let used_now = Attr::CU_MEMPOOL_ATTR_USED_MEM_CURRENT;
    let used = counter(&mut steps, "used counts the allocation", used_now, &|v| {
        v >= size as u64
    });
    let held = counter(&mut steps, "reserved covers used", reserved, &|v| v >= used);
    counter(
        &mut steps,
        "used high ≥ used",
        Attr::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        &|v| v >= used,
    );
    counter(
        &mut steps,
        "reserved high ≥ reserved",
        Attr::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        &|v| v >= held,
    );
    let free_during = free_bytes();
    steps.check(
        "cuMemGetInfo counts pool memory",
        free_before.saturating_sub(free_during) >= size,
        || format!("free {free_before} -> {free_during}"),
    );

    steps.expect("free", free_async(p, &s), CUresult::CUDA_SUCCESS);
    steps.expect("synchronize", sync(&s), CUresult::CUDA_SUCCESS);
    counter(&mut steps, "nothing used after the free", used_now, &|v| {
        v == 0
    });
    counter(
        &mut steps,
        "the threshold keeps the memory reserved",
        reserved,
        &|v| v >= size as u64,
    );
    // SAFETY: a live pool.
    let r = unsafe { sys::cuMemPoolTrimTo(pool, 0) };
    steps.expect("cuMemPoolTrimTo(0)", r, CUresult::CUDA_SUCCESS);
    counter(
        &mut steps,
        "trim gives every unused byte back",
        reserved,
        &|v| v == 0,
    );
    let free_after = free_bytes();
    steps.check(
        "cuMemGetInfo sees the memory back",
        free_after.saturating_sub(free_during) >= size,
        || format!("free {free_during} -> {free_after}"),
    );

    let used_high = Attr::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
    let r = set_u64(pool, used_high, 0);
    steps.expect("reset the used high watermark", r, CUresult::CUDA_SUCCESS);
    counter(
        &mut steps,
        "the used high watermark is the current use",
        used_high,
        &|v| v == 0,
    );
    let r = set_u64(pool, Attr::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 5);
    steps.expect(
        "a high watermark can only be reset",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    let r = set_u64(pool, used_now, 0);
    steps.expect(
        "current use is read-only",
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
    );
    steps.expect(
        "cuMemPoolDestroy",
        destroy_pool(pool),
        CUresult::CUDA_SUCCESS,
    );
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn set_mem_pool_changes_the_pool_alloc_async_uses_until_it_is_destroyed() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let dev = ctx.device();
    let s = Stream::new(&ctx).expect("stream");
    let (_, default) = default_pool(dev);
    let pool = create_pool(dev);
    let mut steps = Steps::default();
    steps.check(
        "the current pool starts as the default",
        current_pool(dev) == default,
        || "another".into(),
    );
    // SAFETY: a live pool of this device.
    let r = unsafe { sys::cuDeviceSetMemPool(dev, pool) };
    steps.expect("cuDeviceSetMemPool", r, CUresult::CUDA_SUCCESS);
    steps.check(
        "cuDeviceGetMemPool answers the pool set",
        current_pool(dev) == pool,
        || "another".into(),
    );
    let (r, p) = alloc_async(4096, &s);
    steps.expect("cuMemAllocAsync", r, CUresult::CUDA_SUCCESS);
    let mut owner: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: MEMPOOL_HANDLE is a CUmemoryPool; `owner` is one.
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&raw mut owner).cast::<c_void>(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            p,
        )
    };
    steps.expect(
        "cuPointerGetAttribute(MEMPOOL_HANDLE)",
        r,
        CUresult::CUDA_SUCCESS,
    );
    steps.check("the memory came from the pool set", owner == pool, || {
        format!("{owner:?} vs {pool:?}")
    });
    steps.check(
        "the pool counts it",
        get_u64(pool, Attr::CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 4096,
        || "0".into(),
    );
    steps.expect("free", free_async(p, &s), CUresult::CUDA_SUCCESS);
    steps.expect("synchronize", sync(&s), CUresult::CUDA_SUCCESS);
    steps.expect(
        "cuMemPoolDestroy of the current pool",
        destroy_pool(pool),
        CUresult::CUDA_SUCCESS,
    );
    steps.check(
        "the default is current again",
        current_pool(dev) == default,
        || "another".into(),
    );
    steps.finish(&env.choice.kind.to_string());
}

#[test]
fn captured_allocation_and_free_become_graph_memory_nodes_that_replay() {
    let _alone = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx: Arc<Context> = Context::primary(env).expect("retain");
    let s = Stream::new(&ctx).expect("stream");
    let host = PinnedBuffer::alloc(&ctx, 4096).expect("pinned");
    let mut steps = Steps::default();
    steps.expect("cuStreamBeginCapture", begin(&s), CUresult::CUDA_SUCCESS);
    let (r, p) = alloc_async(4096, &s);
    steps.expect("cuMemAllocAsync while capturing", r, CUresult::CUDA_SUCCESS);
    steps.expect(
        "fill",
        memset_async(p, 0x5a, 4096, &s),
        CUresult::CUDA_SUCCESS,
    );
    steps.expect("copy", to_host(&host, p, 4096, &s), CUresult::CUDA_SUCCESS);
    steps.expect(
        "cuMemFreeAsync while capturing",
        free_async(p, &s),
        CUresult::CUDA_SUCCESS,
    );
    let (r, graph) = end(&s);
    steps.expect("cuStreamEndCapture", r, CUresult::CUDA_SUCCESS);
    let mut nodes = [std::ptr::null_mut(); 8];
    let mut count = nodes.len();
    // SAFETY: `nodes` holds `count` entries.
    let r = unsafe { sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) };
    steps.expect("cuGraphGetNodes", r, CUresult::CUDA_SUCCESS);
    let types: Vec<u32> = nodes[..count.min(nodes.len())]
        .iter()
        .map(|&n| {
            let mut t = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: `n` is a node of the graph; `t` is a valid out-pointer.
            let r = unsafe { sys::cuGraphNodeGetType(n, &mut t) };
            assert_eq!(r, CUresult::CUDA_SUCCESS, "cuGraphNodeGetType");
            t as u32
        })
        .collect();
    let mut sorted = types.clone();
    sorted.sort_unstable();
    // MEMCPY 1, MEMSET 2, MEM_ALLOC 10, MEM_FREE 11.
    steps.check(
        "alloc, memset, memcpy and free nodes",
        sorted == [1, 2, 10, 11],
        || format!("{types:?}"),
    );
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: valid out-pointer and graph.
    let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
    steps.expect("cuGraphInstantiateWithFlags", r, CUresult::CUDA_SUCCESS);
    for round in 0..2 {
        // SAFETY: the pinned buffer is not in use by any copy.
        unsafe { std::ptr::write_bytes(host.ptr(), 0, 4096) };
        // SAFETY: a live executable graph and stream.
        let r = unsafe { sys::cuGraphLaunch(exec, s.raw()) };
        steps.expect(
            &format!("cuGraphLaunch #{round}"),
            r,
            CUresult::CUDA_SUCCESS,
        );
        steps.expect("synchronize", sync(&s), CUresult::CUDA_SUCCESS);
        let got = host.read();
        steps.check(
            &format!("launch #{round} filled the graph's memory"),
            got.iter().all(|&b| b == 0x5a),
            || format!("{:?}", &got[..8]),
        );
    }
    // SAFETY: created above, destroyed once each.
    unsafe {
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
    }
    steps.finish(&env.choice.kind.to_string());
}
