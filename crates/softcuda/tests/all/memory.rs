//! Allocation, accounting, copies, fills and pointer queries.

use std::ffi::c_void;

use cudarc::driver::sys::{CUDA_MEMCPY2D, CUdeviceptr, CUmemorytype, CUresult};
use softcuda::exports::*;

use crate::common::{alloc, download, fresh_primary, ok, serial, stream, upload};

fn mem_info() -> (usize, usize) {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    ok(unsafe { cuMemGetInfo_v2(&mut free, &mut total) });
    (free, total)
}

#[test]
fn mem_get_info_accounts_for_allocations() {
    let _g = serial();
    fresh_primary();
    let (free0, total) = mem_info();
    assert!(free0 <= total);
    let d = alloc(10 << 20);
    assert_eq!(mem_info().0, free0 - (10 << 20));
    // SAFETY: valid pointer.
    ok(unsafe { cuMemFree_v2(d) });
    assert_eq!(mem_info().0, free0);
    let mut big: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    unsafe {
        assert_eq!(
            cuMemAlloc_v2(&mut big, total + 1),
            CUresult::CUDA_ERROR_OUT_OF_MEMORY
        );
        assert_eq!(
            cuMemAlloc_v2(&mut big, 0),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuMemFree_v2(d),
            CUresult::CUDA_ERROR_INVALID_VALUE,
            "double free"
        );
    }
}

#[test]
fn reset_frees_the_context_memory() {
    let _g = serial();
    fresh_primary();
    let (free0, _) = mem_info();
    alloc(1 << 20);
    fresh_primary();
    assert_eq!(mem_info().0, free0);
}

#[test]
fn copies_round_trip_and_bad_ranges_are_invalid_value() {
    let _g = serial();
    fresh_primary();
    let a = alloc(1024);
    let b = alloc(1024);
    let data: Vec<u32> = (0..256).collect();
    upload(a, &data);
    // SAFETY: valid device ranges and host buffers throughout.
    unsafe {
        ok(cuMemcpyDtoD_v2(b, a, 1024));
        assert_eq!(download::<u32>(b, 256), data);
        let mut host = vec![0u8; 2048];
        assert_eq!(
            cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), a, 1025),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuMemcpyHtoD_v2(a + 1000, host.as_ptr().cast(), 100),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuMemcpyDtoD_v2(0x10, a, 4),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuMemsetD32_v2(a + 8, 0xdead_beef, 4));
        assert_eq!(
            cuMemsetD32_v2(a + 2, 1, 1),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuMemsetD8_v2(a, 7, 4));
        ok(cuMemsetD16_v2(a + 4, 0x0102, 2));
        let got = download::<u8>(a, 32);
        assert_eq!(&got[..4], &[7, 7, 7, 7]);
        assert_eq!(&got[4..8], &[2, 1, 2, 1]);
        assert_eq!(&got[8..12], &0xdead_beefu32.to_le_bytes());
        ok(cuMemcpy(b, a, 16));
        assert_eq!(download::<u8>(b, 16), got[..16].to_vec());
    }
}

#[test]
fn async_copies_are_ordered_on_their_stream() {
    let _g = serial();
    fresh_primary();
    let s = stream(1);
    let a = alloc(4096);
    let src = vec![5u8; 4096];
    let mut dst = vec![0u8; 4096];
    // SAFETY: valid ranges; `src` is staged at call time and `dst` is filled before return.
    unsafe {
        ok(cuMemcpyHtoDAsync_v2(a, src.as_ptr().cast(), 4096, s));
        ok(cuMemsetD8Async(a + 100, 9, 10, s));
        ok(cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), a, 4096, s));
        ok(cuStreamSynchronize(s));
        ok(cuStreamDestroy_v2(s));
    }
    assert_eq!(dst[99], 5);
    assert_eq!(&dst[100..110], &[9; 10]);
    assert_eq!(dst[110], 5);
}

#[test]
fn pinned_host_memory_is_device_visible_at_the_same_address() {
    let _g = serial();
    fresh_primary();
    // SAFETY: valid out-pointers; the pinned buffer is 64 bytes.
    unsafe {
        let mut h: *mut c_void = std::ptr::null_mut();
        ok(cuMemAllocHost_v2(&mut h, 64));
        let mut dptr: CUdeviceptr = 0;
        ok(cuMemHostGetDevicePointer_v2(&mut dptr, h, 0));
        assert_eq!(dptr, h.addr() as u64);
        let mut mt = 0u32;
        ok(cuPointerGetAttribute((&raw mut mt).cast(), 2, dptr));
        assert_eq!(mt, CUmemorytype::CU_MEMORYTYPE_HOST as u32);
        ok(cuMemsetD8_v2(dptr, 3, 64));
        assert_eq!(*h.cast::<u8>().add(63), 3);
        ok(cuMemFreeHost(h));
        assert_eq!(cuMemFreeHost(h), CUresult::CUDA_ERROR_INVALID_VALUE);
    }
}

#[test]
fn pointer_attributes_and_address_range_describe_the_allocation() {
    let _g = serial();
    let ctx = fresh_primary();
    let a = alloc(1000);
    // SAFETY: valid out-pointers.
    unsafe {
        let (mut base, mut size) = (0u64, 0usize);
        ok(cuMemGetAddressRange_v2(&mut base, &mut size, a + 500));
        assert_eq!((base, size), (a, 1000));
        let mut c: *mut c_void = std::ptr::null_mut();
        ok(cuPointerGetAttribute((&raw mut c).cast(), 1, a + 1));
        assert_eq!(c, ctx.cast());
        let mut mt = 0u32;
        ok(cuPointerGetAttribute((&raw mut mt).cast(), 2, a));
        assert_eq!(mt, CUmemorytype::CU_MEMORYTYPE_DEVICE as u32);
        assert_eq!(
            cuPointerGetAttribute((&raw mut mt).cast(), 2, 8),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut size, 8),
            CUresult::CUDA_ERROR_NOT_FOUND
        );
    }
}

#[test]
fn memcpy_2d_copies_a_pitched_sub_rectangle() {
    let _g = serial();
    fresh_primary();
    let (w, h, pitch) = (4usize, 3usize, 16usize);
    let d = alloc(pitch * h);
    let src: Vec<u8> = (0..(8 * h) as u8).collect(); // host pitch 8
    let mut desc = CUDA_MEMCPY2D {
        srcXInBytes: 2,
        srcY: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: src.as_ptr().cast(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 8,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: d,
        dstArray: std::ptr::null_mut(),
        dstPitch: pitch,
        WidthInBytes: w,
        Height: h,
    };
    // SAFETY: the descriptor's ranges are valid.
    ok(unsafe { cuMemcpy2D_v2(&desc) });
    let got = download::<u8>(d, pitch * h);
    for row in 0..h {
        assert_eq!(
            &got[row * pitch..row * pitch + w],
            &src[row * 8 + 2..row * 8 + 2 + w]
        );
        assert!(
            got[row * pitch + w..(row + 1) * pitch]
                .iter()
                .all(|&b| b == 0)
        );
    }
    desc.dstPitch = 2;
    // SAFETY: as above; the pitch is now too small, so nothing is copied.
    let r = unsafe { cuMemcpy2D_v2(&desc) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
}

#[test]
fn stream_ordered_alloc_and_free_follow_the_stream() {
    let _g = serial();
    fresh_primary();
    let (free0, _) = mem_info();
    let s = stream(1);
    let mut d: CUdeviceptr = 0;
    let mut host = [0u8; 32];
    // SAFETY: valid out-pointers, ranges and stream.
    unsafe {
        ok(cuMemAllocAsync(&mut d, 1 << 20, s));
        // The default pool reserves a whole 2 MiB chunk for it.
        assert_eq!(mem_info().0, free0 - (2 << 20));
        ok(cuMemsetD8Async(d, 0x5a, 32, s));
        ok(cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), d, 32, s));
        ok(cuMemFreeAsync(d, s));
        ok(cuStreamSynchronize(s));
        assert_eq!(cuMemFreeAsync(d, s), CUresult::CUDA_ERROR_INVALID_VALUE);
        ok(cuStreamDestroy_v2(s));
    }
    assert_eq!(host, [0x5a; 32]);
    assert_eq!(mem_info().0, free0);
}

#[test]
fn managed_memory_is_shared_by_host_and_kernels_and_counted() {
    let _g = serial();
    fresh_primary();
    let (free0, _) = mem_info();
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the managed buffer is 16 bytes and used only while live.
    unsafe {
        ok(cuMemAllocManaged(&mut d, 16, 1));
        assert_eq!(mem_info().0, free0 - 16);
        ok(cuMemsetD32_v2(d, 7, 4));
        let host = std::ptr::with_exposed_provenance::<u32>(d as usize);
        assert_eq!(
            *host.add(3),
            7,
            "managed memory is readable from the host at its address"
        );
        let mut managed = 0u32;
        ok(cuPointerGetAttribute((&raw mut managed).cast(), 8, d));
        assert_eq!(managed, 1);
        assert_eq!(
            cuMemAllocManaged(&mut d, 16, 0),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        ok(cuMemFree_v2(d));
    }
    assert_eq!(mem_info().0, free0);
}
