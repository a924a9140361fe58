//! Memory accounting: cuMemGetInfo's free count drops by at least an allocation's size and
//! comes back after the free; the total does not move.

use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use conformance::memory::{DeviceBuffer, PinnedBuffer};
use cudarc::driver::sys::{self, CUresult};

use crate::support::env_or_skip;

#[test]
fn mem_get_info_free_drops_by_the_allocation_and_recovers_after_free() {
    // Exclusive: a concurrent test's allocations would move the free count.
    let _exclusive = exclusive_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    const SIZE: usize = 64 << 20;
    // NVIDIA's driver frees some memory of earlier tests' objects lazily (seen with parallel
    // test threads on the H200: up to 2 MiB moving between two calls), so allow a little.
    const SLACK: usize = 4 << 20;
    let (free0, total0) = ctx.mem_info().expect("cuMemGetInfo");
    assert!(free0 <= total0 && total0 > 0, "free {free0} total {total0}");
    let buf = DeviceBuffer::alloc(&ctx, SIZE).expect("alloc 64 MiB");
    let (free1, total1) = ctx.mem_info().expect("cuMemGetInfo");
    assert_eq!(total1, total0, "total changed with an allocation");
    assert!(
        free1 + SIZE <= free0 + SLACK,
        "free went {free0} → {free1} for a {SIZE}-byte allocation"
    );
    drop(buf);
    let (free2, _) = ctx.mem_info().expect("cuMemGetInfo");
    assert!(
        free2 + SLACK >= free1 + SIZE,
        "free went {free1} → {free2} after freeing {SIZE} bytes"
    );
}

#[test]
fn pointer_attributes_identify_device_and_pinned_host_memory() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let device = DeviceBuffer::alloc(&ctx, 4096).expect("alloc");
    let host = PinnedBuffer::alloc(&ctx, 4096).expect("pinned");
    let memory_type = |ptr: u64| {
        let mut value: u32 = 0;
        // SAFETY: CU_POINTER_ATTRIBUTE_MEMORY_TYPE writes one unsigned int into `value`.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut value as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr,
            )
        };
        (r, value)
    };
    let context_of = |ptr: u64| {
        let mut value: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: CU_POINTER_ATTRIBUTE_CONTEXT writes one CUcontext into `value`.
        let r = unsafe {
            sys::cuPointerGetAttribute(
                (&mut value as *mut sys::CUcontext).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
                ptr,
            )
        };
        (r, value)
    };
    let ok = CUresult::CUDA_SUCCESS;
    let (dev_type, host_type) = (
        sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32,
        sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32,
    );
    assert_eq!(
        memory_type(device.ptr()),
        (ok, dev_type),
        "device allocation"
    );
    assert_eq!(
        memory_type(device.ptr() + 100),
        (ok, dev_type),
        "interior of a device allocation"
    );
    assert_eq!(
        memory_type(host.ptr() as u64),
        (ok, host_type),
        "pinned host allocation"
    );
    assert_eq!(context_of(device.ptr()), (ok, ctx.raw()), "owning context");
    let stack_value = 0u64;
    let foreign = &stack_value as *const u64 as u64;
    assert_eq!(
        memory_type(foreign).0,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "memory the driver never allocated"
    );
}

#[test]
fn memset_d8_d16_d32_fill_exactly_the_requested_ranges() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    let buf = DeviceBuffer::alloc(&ctx, 512).expect("alloc");
    buf.fill(0).expect("zero");
    let p = buf.ptr();
    // SAFETY: every range below lies inside the 512-byte allocation, the current context's.
    let codes = unsafe {
        [
            sys::cuMemsetD32_v2(p + 16, 0xdead_beef, 10),
            sys::cuMemsetD16_v2(p + 100, 0xabcd, 7),
            sys::cuMemsetD8_v2(p + 200, 0x5a, 13),
            sys::cuMemsetD32Async(p + 300, 0x0102_0304, 5, std::ptr::null_mut()),
        ]
    };
    assert_eq!(
        codes,
        [CUresult::CUDA_SUCCESS; 4],
        "cuMemsetD32/D16/D8/D32Async"
    );
    let mut want = vec![0u8; 512];
    for k in 0..10 {
        want[16 + 4 * k..20 + 4 * k].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    }
    for k in 0..7 {
        want[100 + 2 * k..102 + 2 * k].copy_from_slice(&0xabcdu16.to_le_bytes());
    }
    want[200..213].fill(0x5a);
    for k in 0..5 {
        want[300 + 4 * k..304 + 4 * k].copy_from_slice(&0x0102_0304u32.to_le_bytes());
    }
    assert_eq!(buf.to_vec().expect("read"), want);
}

#[test]
fn registered_host_memory_takes_async_copies_and_stays_the_callers() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain");
    const LEN: usize = 1 << 16;
    let dev = DeviceBuffer::alloc(&ctx, LEN).expect("alloc");
    let pattern: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
    dev.write(&pattern).expect("write");
    let stream = conformance::stream::Stream::new(&ctx).expect("stream");
    let layout = std::alloc::Layout::from_size_align(LEN, 4096).expect("layout");
    // SAFETY: a nonzero-size layout; freed below with the same layout.
    let host = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!host.is_null());
    ctx.bind().expect("bind");
    // SAFETY: `host` is LEN bytes of our own memory, alive until dealloc below; it is
    // unregistered before that, and the copy into it is synchronized first.
    unsafe {
        assert_eq!(
            sys::cuMemHostRegister_v2(host.cast(), LEN, 0),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuMemHostRegister_v2(host.add(4096).cast(), 4096, 0),
            CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            "a range inside a registration"
        );
        let r = sys::cuMemcpyDtoHAsync_v2(host.cast(), dev.ptr(), LEN, stream.raw());
        assert_eq!(r, CUresult::CUDA_SUCCESS);
        stream.synchronize().expect("synchronize");
        assert!(std::slice::from_raw_parts(host, LEN) == &pattern[..]);
        assert_eq!(
            sys::cuMemHostUnregister(host.cast()),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuMemHostUnregister(host.cast()),
            CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
        );
        // Still ours after unregistering: writable, and freed by us.
        host.write_bytes(0xAB, LEN);
        assert_eq!(*host.add(LEN - 1), 0xAB);
        std::alloc::dealloc(host, layout);
    }
}
