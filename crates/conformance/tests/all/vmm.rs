//! Virtual memory management and host-mapped memory, as a program uses them: reserve an address
//! range, create physical memory, map it, grant access, run a kernel through the mapping, read
//! back, unmap and release; one physical chunk mapped at two addresses; the errors for misaligned
//! sizes and addresses; and page-locked host memory (`cuMemHostAlloc` with DEVICEMAP) written by
//! a kernel and read by the host in place; and what a primary-context reset does to virtual
//! memory (physical allocations outlive it, so gpuhost's Arena releases a dead generation's
//! handles). NVIDIA's driver is the reference.

use std::sync::Arc;

use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use conformance::module::{Function, Module};
use conformance::stream::{KernelArg, LaunchShape, Stream};
use cudarc::driver::result;
use cudarc::driver::sys::{self, CUdevice_attribute as A, CUresult};

use crate::support::{ResetOnDrop, Steps, clang_ptx, env_or_skip, free_bytes};

const OK: CUresult = CUresult::CUDA_SUCCESS;
const INVALID: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;
const NOT_SUPPORTED: CUresult = CUresult::CUDA_ERROR_NOT_SUPPORTED;

/// Pinned device memory on device 0, no shareable handle type.
fn device_prop() -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: 0,
        },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

fn granularity(option: sys::CUmemAllocationGranularity_flags) -> (CUresult, usize) {
    let mut g = 0usize;
    // SAFETY: `g` is a valid out-pointer and the property struct outlives the call.
    let r = unsafe { sys::cuMemGetAllocationGranularity(&mut g, &device_prop(), option) };
    (r, g)
}

fn min_granularity() -> usize {
    let (r, g) =
        granularity(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    assert_eq!(r, OK, "cuMemGetAllocationGranularity");
    g
}

fn reserve(size: usize, alignment: usize) -> (CUresult, u64) {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: `p` is a valid out-pointer.
    let r = unsafe { sys::cuMemAddressReserve(&mut p, size, alignment, 0, 0) };
    (r, p)
}

fn create_with(size: usize, prop: &sys::CUmemAllocationProp) -> (CUresult, u64) {
    let mut h: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: `h` is a valid out-pointer and `prop` outlives the call.
    let r = unsafe { sys::cuMemCreate(&mut h, size, prop, 0) };
    (r, h)
}

fn create(size: usize) -> u64 {
    let (r, h) = create_with(size, &device_prop());
    assert_eq!(r, OK, "cuMemCreate({size})");
    h
}

fn map(ptr: u64, size: usize, offset: usize, handle: u64) -> CUresult {
    // SAFETY: the driver validates every argument; a bad one is an error code, not UB.
    unsafe { sys::cuMemMap(ptr, size, offset, handle, 0) }
}

fn set_access(ptr: u64, size: usize, flags: sys::CUmemAccess_flags) -> CUresult {
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: 0,
        },
        flags,
    };
    // SAFETY: one descriptor, valid for the call.
    unsafe { sys::cuMemSetAccess(ptr, size, &desc, 1) }
}

fn get_access(ptr: u64) -> (CUresult, u64) {
    let loc = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: 0,
    };
    let mut flags = 0u64;
    // SAFETY: valid out-pointer and location.
    let r = unsafe { sys::cuMemGetAccess(&mut flags, &loc, ptr) };
    (r, flags)
}

const RW: sys::CUmemAccess_flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

fn htod(dst: u64, data: &[f32]) {
    // SAFETY: `data` is readable for its byte length; the driver checks `dst`.
    let r = unsafe { sys::cuMemcpyHtoD_v2(dst, data.as_ptr().cast(), std::mem::size_of_val(data)) };
    assert_eq!(r, OK, "cuMemcpyHtoD into mapped memory");
}

fn dtoh(src: u64, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    // SAFETY: `out` is writable for n floats; the driver checks `src`.
    let r = unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, n * 4) };
    assert_eq!(r, OK, "cuMemcpyDtoH from mapped memory");
    out
}

fn vector_add(ctx: &Arc<Context>) -> Function {
    let module = Module::load_ptx(ctx, &clang_ptx("vector_add")).expect("load vector_add");
    module.function("vector_add").expect("vector_add")
}

/// Launches `c = a + b` over `n` floats on a new stream and waits.
fn run_add(ctx: &Arc<Context>, f: &Function, a: u64, b: u64, c: u64, n: usize) {
    let stream = Stream::new(ctx).expect("stream");
    let shape = LaunchShape {
        grid: [n.div_ceil(256) as u32, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
    };
    let args = [
        KernelArg::Ptr(a),
        KernelArg::Ptr(b),
        KernelArg::Ptr(c),
        KernelArg::I32(n as i32),
    ];
    stream.launch(f, shape, &args).expect("launch");
    stream.synchronize().expect("kernel through mapped memory");
}

#[test]
fn virtual_memory_management_is_supported_with_a_2_mib_granularity() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    // SAFETY: `env.device` came from cuDeviceGet after cuInit.
    let vmm = unsafe {
        result::device::get_attribute(
            env.device,
            A::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
        )
    }
    .expect("cuDeviceGetAttribute");
    assert_eq!(vmm, 1, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED");
    let min = min_granularity();
    assert_eq!(min, 2 << 20, "minimum granularity (an H200 says 2 MiB)");
    let (r, rec) =
        granularity(sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    assert_eq!(r, OK, "recommended granularity");
    assert!(
        rec >= min && rec % min == 0,
        "recommended {rec}, minimum {min}"
    );
}

#[test]
fn mapped_memory_is_written_by_a_kernel_across_two_chunks_and_released_without_a_leak() {
    // Exclusive: the free-memory check must not see other tests' allocations.
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let f = vector_add(&ctx);
    let g = min_granularity();
    // NVIDIA frees a little of earlier tests' memory lazily (see memory.rs): allow some slack.
    const SLACK: usize = 4 << 20;
    let free0 = free_bytes();
    let (r, base) = reserve(4 * g, 0);
    assert_eq!(r, OK, "cuMemAddressReserve");
    assert_eq!(base % g as u64, 0, "reservation aligned to the granularity");
    let (h1, h2) = (create(g), create(g));
    assert!(
        free_bytes() + 2 * g <= free0 + SLACK,
        "two chunks count as used"
    );
    assert_eq!(map(base, g, 0, h1), OK, "map chunk 1");
    assert_eq!(
        map(base + g as u64, g, 0, h2),
        OK,
        "map chunk 2 right after it"
    );
    assert_eq!(get_access(base).1, 0, "a new mapping starts inaccessible");
    assert_eq!(
        set_access(base, 2 * g, RW),
        OK,
        "cuMemSetAccess over both chunks"
    );
    assert_eq!(
        get_access(base + g as u64 + 8),
        (OK, 3),
        "READWRITE in chunk 2"
    );

    // a and b in chunk 1; c straddles the boundary between the chunks.
    let n = 4096usize;
    let (a, b) = (base, base + 65536);
    let c = base + g as u64 - 8192;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    htod(a, &xs);
    htod(b, &ys);
    run_add(&ctx, &f, a, b, c, n);
    let got = dtoh(c, n);
    let want: Vec<f32> = (0..n).map(|i| 1.5 * i as f32).collect();
    assert_eq!(got, want, "c = a + b read back through the mapping");

    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: valid out-pointer; the address lies in chunk 2's mapping.
    let r = unsafe { sys::cuMemRetainAllocationHandle(&mut handle, (c + 8192) as *mut _) };
    assert_eq!(
        (r, handle),
        (OK, h2),
        "the handle mapped at an address in chunk 2"
    );
    // SAFETY: releases the reference just retained.
    assert_eq!(unsafe { sys::cuMemRelease(handle) }, OK);
    let mut prop = device_prop();
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_INVALID;
    // SAFETY: valid out-pointer; h1 is live.
    let r = unsafe { sys::cuMemGetAllocationPropertiesFromHandle(&mut prop, h1) };
    assert_eq!(r, OK, "cuMemGetAllocationPropertiesFromHandle");
    assert_eq!(
        prop.type_,
        sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED
    );
    assert_eq!(
        (prop.location.type_, prop.location.id),
        (sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, 0)
    );

    // SAFETY: unmaps exactly the two mappings made above; no work uses them any more.
    unsafe {
        assert_eq!(
            sys::cuMemUnmap(base, 2 * g),
            OK,
            "unmap both chunks at once"
        );
        assert_eq!(sys::cuMemRelease(h1), OK);
        assert_eq!(sys::cuMemRelease(h2), OK);
        assert_eq!(sys::cuMemAddressFree(base, 4 * g), OK);
    }
    let free1 = free_bytes();
    assert!(
        free1 + SLACK >= free0,
        "free went {free0} → {free1} after release"
    );
}

#[test]
fn one_physical_chunk_mapped_twice_shows_the_same_bytes() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let f = vector_add(&ctx);
    let g = min_granularity();
    let (r, base) = reserve(2 * g, 0);
    assert_eq!(r, OK, "cuMemAddressReserve");
    let h = create(g);
    let alias = base + g as u64;
    assert_eq!(map(base, g, 0, h), OK);
    assert_eq!(
        map(alias, g, 0, h),
        OK,
        "the same chunk at a second address"
    );
    // The handle can go now: the mappings keep the memory.
    // SAFETY: drops cuMemCreate's reference; the two mappings remain.
    assert_eq!(unsafe { sys::cuMemRelease(h) }, OK);
    assert_eq!(set_access(base, 2 * g, RW), OK);
    let n = 1024;
    let xs: Vec<f32> = (0..n).map(|i| (i * 3) as f32).collect();
    htod(base, &xs);
    assert_eq!(
        dtoh(alias, n),
        xs,
        "written at one address, read at the other"
    );
    // A kernel reads through the alias and writes through the first address.
    run_add(&ctx, &f, alias, alias, base + 8192, n);
    let doubled: Vec<f32> = xs.iter().map(|x| 2.0 * x).collect();
    assert_eq!(
        dtoh(alias + 8192, n),
        doubled,
        "the kernel's write seen through the alias"
    );
    // SAFETY: unmaps the two mappings made above and frees the reservation.
    unsafe {
        assert_eq!(sys::cuMemUnmap(base, g), OK);
        assert_eq!(sys::cuMemUnmap(alias, g), OK);
        assert_eq!(sys::cuMemAddressFree(base, 2 * g), OK);
    }
}

#[test]
fn partial_or_misaligned_mappings_are_refused_as_nvidia_refuses_them() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let _ctx = Context::primary(env).expect("retain");
    let g = min_granularity();
    let mut steps = Steps::default();
    let (r, h) = create_with(g / 2, &device_prop());
    steps.expect("cuMemCreate of half the granularity", r, INVALID);
    if r == OK {
        // SAFETY: frees what the call above unexpectedly created.
        unsafe { sys::cuMemRelease(h) };
    }
    let mut bad = device_prop();
    bad.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_INVALID;
    steps.expect(
        "cuMemCreate of an invalid allocation type",
        create_with(g, &bad).0,
        INVALID,
    );
    steps.expect(
        "cuMemAddressReserve with alignment 3",
        reserve(g, 3).0,
        INVALID,
    );

    let (r, base) = reserve(4 * g, 0);
    assert_eq!(r, OK, "cuMemAddressReserve");
    let h = create(2 * g);
    // NVIDIA maps whole allocations only: any other offset or size is NOT_SUPPORTED, before
    // alignment is looked at (seen on the H200, driver 580).
    for (what, at, len, offset) in [
        ("cuMemMap at base + 64 KiB", base + 65536, g, 0),
        ("cuMemMap of g + 64 KiB bytes", base, g + 65536, 0),
        ("cuMemMap at offset 64 KiB", base, g, 65536),
        ("cuMemMap past the allocation's end", base, 2 * g, g),
        ("cuMemMap of the first granule alone", base, g, 0),
    ] {
        steps.expect(what, map(at, len, offset, h), NOT_SUPPORTED);
    }
    steps.expect(
        "cuMemSetAccess of a granule nothing maps",
        set_access(base, g, RW),
        INVALID,
    );
    steps.expect(
        "cuMemMap of the whole allocation",
        map(base, 2 * g, 0, h),
        OK,
    );
    steps.expect(
        "cuMemSetAccess reaching the unmapped granules after it",
        set_access(base, 4 * g, RW),
        INVALID,
    );
    steps.expect(
        "cuMemSetAccess of the mapped range",
        set_access(base, 2 * g, RW),
        OK,
    );
    // SAFETY: undoes the one mapping made above, then frees the handle and reservation.
    unsafe {
        steps.expect("cuMemUnmap", sys::cuMemUnmap(base, 2 * g), OK);
        steps.expect("cuMemRelease", sys::cuMemRelease(h), OK);
        steps.expect("cuMemAddressFree", sys::cuMemAddressFree(base, 4 * g), OK);
    }
    steps.finish(&conformance::driver::driver_name());
}

#[test]
fn devicemap_host_memory_is_written_by_a_kernel_and_read_by_the_host_in_place() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let f = vector_add(&ctx);
    let n = 256usize;
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; DEVICEMAP asks for memory the device can address.
    let r = unsafe { sys::cuMemHostAlloc(&mut host, 3 * n * 4, sys::CU_MEMHOSTALLOC_DEVICEMAP) };
    assert_eq!(r, OK, "cuMemHostAlloc(DEVICEMAP)");
    let mut dev: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer; `host` is the page-locked allocation just made.
    let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) };
    assert_eq!(r, OK, "cuMemHostGetDevicePointer");
    // SAFETY: the allocation holds 3n floats, page-locked, aligned; no device work runs yet.
    let floats = unsafe { std::slice::from_raw_parts_mut(host.cast::<f32>(), 3 * n) };
    for i in 0..n {
        floats[i] = i as f32;
        floats[n + i] = 100.0;
    }
    let bytes = (n * 4) as u64;
    run_add(&ctx, &f, dev, dev + bytes, dev + 2 * bytes, n);
    // SAFETY: the kernel has finished (run_add synchronised); reads happen on this thread only.
    let out = unsafe { std::slice::from_raw_parts(host.cast::<f32>().add(2 * n), n) };
    let want: Vec<f32> = (0..n).map(|i| i as f32 + 100.0).collect();
    assert_eq!(out, &want[..], "the kernel's writes, read in host memory");
    // SAFETY: frees the allocation made above, once; nothing uses it any more.
    assert_eq!(unsafe { sys::cuMemFreeHost(host) }, OK);
}

/// What a primary-context reset does to virtual memory, step by step, as an H200 (CUDA 13, driver
/// 580) answered on 2026-12-01 (bench/h200-runs/2026-12-01-s4): nothing of it goes with the
/// context. The physical chunk stays counted as used, the old range can still be unmapped and
/// its reservation freed, cuMemRelease of the handle succeeds, and then the memory comes back.
/// Each step prints what it observed (run with `--nocapture`). gpuhost's Arena relies on this: a
/// dead generation's arena must still unmap, free and release what it made.
#[test]
fn a_primary_context_reset_keeps_physical_memory_until_its_handle_is_released() {
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let _reset = ResetOnDrop(env.device);
    let ctx = Context::primary(env).expect("retain");
    let g = min_granularity();
    const SLACK: usize = 4 << 20;
    let free0 = free_bytes();
    let (r, base) = reserve(8 * g, 0);
    assert_eq!(r, OK, "cuMemAddressReserve");
    let h = create(4 * g);
    assert_eq!(map(base, 4 * g, 0, h), OK);
    assert_eq!(set_access(base, 4 * g, RW), OK);
    htod(base, &[1.0, 2.0, 3.0]);
    assert!(
        free_bytes() + 4 * g <= free0 + SLACK,
        "the chunk counts as used"
    );

    let mut steps = Steps::default();
    let driver = conformance::driver::driver_name();
    let observed = |step: &str, r: CUresult| {
        eprintln!("{driver}: after the reset, {step} -> {r:?}");
        r
    };
    // SAFETY: the exclusive lock keeps every other test off the device while we reset.
    let r = unsafe { sys::cuDevicePrimaryCtxReset_v2(env.device) };
    steps.expect("cuDevicePrimaryCtxReset", r, OK);
    let again = Context::primary(env).expect("re-retain after reset");
    let free1 = free_bytes();
    eprintln!("{driver}: free before {free0}, after the reset {free1}");
    steps.check(
        "the physical chunk outlives the reset (H200: confirmed)",
        free1 + 4 * g <= free0 + SLACK,
        || format!("free went {free0} → {free1}: the reset freed the chunk"),
    );
    // SAFETY: the range belonged to the destroyed context; the driver checks it.
    let unmapped = observed("cuMemUnmap(old range)", unsafe {
        sys::cuMemUnmap(base, 4 * g)
    });
    steps.check(
        "the old mapping outlives the context (H200)",
        unmapped == OK,
        || format!("cuMemUnmap of the old range answered {unmapped:?}"),
    );
    // SAFETY: as above.
    let freed = observed("cuMemAddressFree(old reservation)", unsafe {
        sys::cuMemAddressFree(base, 8 * g)
    });
    steps.check(
        "the old reservation outlives the context (H200)",
        freed == OK,
        || format!("cuMemAddressFree of the old reservation answered {freed:?}"),
    );
    // SAFETY: the handle came from cuMemCreate and is released once.
    let released = observed("cuMemRelease(old handle)", unsafe { sys::cuMemRelease(h) });
    steps.expect(
        "the old handle is still live (H200: confirmed)",
        released,
        OK,
    );
    let free2 = free_bytes();
    eprintln!("{driver}: free after cuMemRelease {free2}");
    steps.check(
        "releasing the handle gives the memory back (H200)",
        free2 + SLACK >= free0,
        || format!("free went {free0} → {free1} → {free2} after cuMemRelease"),
    );
    drop((again, ctx));
    steps.finish(&driver);
}
