//! softcuda's own guarantees for virtual memory management, beyond what the conformance suite
//! compares with NVIDIA: unmapping waits for a running kernel still using the mapping (never a
//! crash),
//! a kernel touching a mapping without access gets an illegal-address fault (not a host
//! SIGSEGV), a mapping keeps its memory after cuMemRelease, and a destroyed context takes its
//! reservations with it while its physical memory waits for cuMemRelease (as on NVIDIA).

use std::ffi::c_void;

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUfunction, CUresult, CUstream};
use softcuda::exports::*;

use crate::common::{
    alloc, download, fresh_primary, in_child, launch_spin, ok, serial, spin_kernel, stream, upload,
    wait_running,
};

const G: usize = 2 << 20;

/// Launches `spin(p, go, done)` on `s` (one thread); `go` and `done` are fresh 4-byte
/// allocations, `go` holding `go_now`; returns them.
fn launch_spin_once(
    f: CUfunction,
    s: CUstream,
    p: CUdeviceptr,
    go_now: bool,
) -> (CUdeviceptr, CUdeviceptr) {
    let go = alloc(4);
    upload(go, &[u32::from(go_now)]);
    let done = alloc(4);
    upload(done, &[0u32]);
    launch_spin(f, s, 1, [p, go, done]);
    (go, done)
}

/// The raw structs the exports take, spelled out here as a C program would.
mod softcuda_vmm {
    /// `CUmemAllocationProp`.
    #[repr(C)]
    pub struct Prop {
        kind: u32,
        handle_types: u32,
        location: [i32; 2],
        win32: *mut std::ffi::c_void,
        flags: [u8; 8],
    }

    impl Prop {
        pub fn device0() -> Prop {
            Prop {
                kind: 1,
                handle_types: 0,
                location: [1, 0],
                win32: std::ptr::null_mut(),
                flags: [0; 8],
            }
        }
    }

    /// `CUmemAccessDesc`.
    #[repr(C)]
    pub struct Access {
        pub location: [i32; 2],
        pub flags: u32,
    }
}

/// Reserves `n` granules, maps one new granule-sized chunk at the start with `flags` access;
/// returns (base, handle).
fn mapped_chunk(n: usize, flags: u32) -> (CUdeviceptr, u64) {
    let (mut base, mut h) = (0, 0);
    let access = softcuda_vmm::Access {
        location: [1, 0],
        flags,
    };
    let prop = softcuda_vmm::Prop::device0();
    // SAFETY: valid out-pointers and structs laid out as cuda.h's.
    unsafe {
        ok(cuMemAddressReserve(&mut base, n * G, 0, 0, 0));
        ok(cuMemCreate(&mut h, G, (&raw const prop).cast(), 0));
        ok(cuMemMap(base, G, 0, h, 0));
        if flags != 0 {
            ok(cuMemSetAccess(base, G, (&raw const access).cast(), 1));
        }
    }
    (base, h)
}

fn free_mem() -> usize {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    ok(unsafe { cuMemGetInfo_v2(&mut free, &mut total) });
    free
}

#[test]
fn unmap_waits_for_a_kernel_still_using_the_mapping() {
    let _g = serial();
    let ctx = fresh_primary() as usize;
    let f = spin_kernel();
    let (base, h) = mapped_chunk(1, 3);
    let s = stream(1);
    let (go, done) = launch_spin_once(f, s, base, false);
    let (go, done) = (go as *mut u32, done as *const u32);
    // Wait until the kernel runs, so it holds the mapping when cuMemUnmap starts.
    wait_running(base);
    let done_addr = done as usize;
    let unmapper = std::thread::spawn(move || {
        // SAFETY: binds this test's context on the new thread.
        ok(unsafe { cuCtxSetCurrent(ctx as CUcontext) });
        // SAFETY: unmaps the one mapping made above while the kernel uses it: softcuda must wait.
        ok(unsafe { cuMemUnmap(base, G) });
        // SAFETY: `done` is a live 4-byte allocation, at a host address in softcuda.
        unsafe { (done_addr as *const u32).read_volatile() }
    });
    // Meanwhile other virtual-memory calls go on: the waiting unmap holds no lock. (The pause
    // lets the unmapper reach its wait first; were it later, this check would pass vacuously.)
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (other, oh) = mapped_chunk(1, 3);
    // SAFETY: the mapping, handle and reservation just made; nothing uses them.
    unsafe {
        ok(cuMemUnmap(other, G));
        ok(cuMemRelease(oh));
        ok(cuMemAddressFree(other, G));
    }
    assert!(
        !unmapper.is_finished(),
        "cuMemUnmap returned while the kernel still used the mapping"
    );
    // Only now may the kernel end; the unmap returns after it.
    // SAFETY: `go` is a live 4-byte allocation at a host address in softcuda; the kernel reads
    // it with volatile loads.
    unsafe { go.write_volatile(1) };
    let after = unmapper.join().unwrap();
    assert_eq!(after, 1, "unmap returned before the kernel ended");
    // SAFETY: a live stream; the kernel ended without a fault.
    ok(unsafe { cuStreamSynchronize(s) });
    let mut probe = 0u32;
    // SAFETY: `probe` is writable; the address is no longer mapped.
    let r = unsafe { cuMemcpyDtoH_v2((&raw mut probe).cast(), base, 4) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE, "unmapped memory");
    // SAFETY: the handle and reservation made above, released once.
    unsafe {
        ok(cuMemRelease(h));
        ok(cuMemAddressFree(base, G));
    }
}

#[test]
fn a_mapping_keeps_its_memory_after_release_until_unmapped() {
    let _g = serial();
    fresh_primary();
    let free0 = free_mem();
    let (base, h) = mapped_chunk(1, 3);
    // SAFETY: drops the only handle reference; the mapping remains.
    ok(unsafe { cuMemRelease(h) });
    assert_eq!(free_mem() + G, free0, "still counted while mapped");
    upload(base, &[7u32, 8, 9]);
    assert_eq!(download::<u32>(base + 4, 2), [8, 9]);
    // SAFETY: a released handle is gone: a second release is refused.
    let r = unsafe { cuMemRelease(h) };
    assert_eq!(r, CUresult::CUDA_ERROR_INVALID_VALUE);
    // SAFETY: the mapping and reservation made above.
    unsafe {
        ok(cuMemUnmap(base, G));
        ok(cuMemAddressFree(base, G));
    }
    assert_eq!(free_mem(), free0, "freed with its last mapping");
}

#[test]
fn virtual_memory_outlives_a_destroyed_context_until_unmapped_freed_and_released() {
    let _g = serial();
    fresh_primary();
    let free0 = free_mem();
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the new context becomes current.
    ok(unsafe { cuCtxCreate_v2(&mut ctx, 0, 0) });
    let (base, h) = mapped_chunk(2, 3);
    upload(base, &[1u32]);
    assert!(free_mem() < free0);
    // SAFETY: destroys the context made above (and pops it).
    ok(unsafe { cuCtxDestroy_v2(ctx) });
    fresh_primary();
    // As on NVIDIA (an H200 answered each step so): reservations, mappings and physical
    // allocations are the process's, not the context's.
    assert!(
        free_mem() < free0,
        "the chunk stays until its handle is released"
    );
    // SAFETY: the mapping and reservation made above, undone once each.
    unsafe {
        ok(cuMemUnmap(base, G));
        ok(cuMemAddressFree(base, 2 * G));
    }
    // SAFETY: the handle from cuMemCreate, released once.
    ok(unsafe { cuMemRelease(h) });
    assert_eq!(free_mem(), free0, "released, the chunk is gone");
}

#[test]
fn a_kernel_touching_a_mapping_without_access_faults_with_illegal_address() {
    let _g = serial();
    in_child(
        "vmm::a_kernel_touching_a_mapping_without_access_faults_with_illegal_address",
        |_| {},
        || {
            fresh_primary();
            let f = spin_kernel();
            let (base, _h) = mapped_chunk(1, 3);
            upload(base, &[1u32]);
            let none = softcuda_vmm::Access {
                location: [1, 0],
                flags: 0,
            };
            // SAFETY: revokes the access granted above; one descriptor.
            ok(unsafe { cuMemSetAccess(base, G, (&raw const none).cast(), 1) });
            let s = stream(1);
            launch_spin_once(f, s, base, true);
            // SAFETY: a live stream.
            let r = unsafe { cuStreamSynchronize(s) };
            assert_eq!(r, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        },
    );
}

#[test]
fn hostile_sizes_offsets_and_addresses_are_errors_never_a_crash() {
    let _g = serial();
    fresh_primary();
    let prop = softcuda_vmm::Prop::device0();
    let rw = softcuda_vmm::Access {
        location: [1, 0],
        flags: 3,
    };
    let bad_location = softcuda_vmm::Access {
        location: [1, 7],
        flags: 3,
    };
    let (base, h) = mapped_chunk(2, 3);
    let top = u64::MAX - (G as u64 - 1);
    let invalid = CUresult::CUDA_ERROR_INVALID_VALUE;
    // SAFETY: every pointer passed is valid; the values are hostile on purpose.
    unsafe {
        let mut p = 0;
        assert_ne!(
            cuMemAddressReserve(&mut p, usize::MAX & !4095, 0, 0, 0),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(cuMemAddressReserve(&mut p, G, 0, 0, 1), invalid, "flags");
        let mut h2 = 0;
        assert_ne!(
            cuMemCreate(&mut h2, usize::MAX & !(G - 1), (&raw const prop).cast(), 0),
            CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            cuMemMap(top, G, 0, h, 0),
            invalid,
            "outside every reservation"
        );
        // A partial mapping (offset or size other than the allocation's) is NOT_SUPPORTED, as on
        // NVIDIA's driver.
        assert_eq!(
            cuMemMap(base + G as u64, G, usize::MAX & !(G - 1), h, 0),
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            "offset"
        );
        assert_eq!(
            cuMemMap(base + G as u64, usize::MAX & !(G - 1), 0, h, 0),
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            "size"
        );
        assert_eq!(
            cuMemMap(base + G as u64, G, 0, 0xdead, 0),
            invalid,
            "unknown handle"
        );
        assert_eq!(
            cuMemMap(base, G, 0, h, 0),
            invalid,
            "over an existing mapping"
        );
        assert_eq!(cuMemSetAccess(top, G, (&raw const rw).cast(), 1), invalid);
        assert_eq!(
            cuMemSetAccess(base, usize::MAX & !(G - 1), (&raw const rw).cast(), 1),
            invalid
        );
        assert_eq!(
            cuMemSetAccess(base, G, (&raw const rw).cast(), 0),
            invalid,
            "no descriptor"
        );
        assert_eq!(
            cuMemSetAccess(base, G, (&raw const bad_location).cast(), 1),
            CUresult::CUDA_ERROR_INVALID_DEVICE
        );
        assert_eq!(cuMemUnmap(top, G), invalid);
        assert_eq!(cuMemUnmap(base + 4096, G), invalid, "unaligned");
        let (mut flags, loc) = (0u64, [1i32, 0]);
        assert_eq!(
            cuMemGetAccess(&mut flags, (&raw const loc).cast(), u64::MAX),
            invalid
        );
        let mut got = 0;
        assert_eq!(
            cuMemRetainAllocationHandle(&mut got, u64::MAX as *mut c_void),
            invalid
        );
        assert_eq!(cuMemRelease(0xdead), invalid);
        assert_eq!(
            cuMemAddressFree(base, G),
            invalid,
            "not the whole reservation"
        );
        assert_eq!(cuMemAddressFree(base, 2 * G), invalid, "still mapped");
    }
    // The mapping made above is intact after all that.
    upload(base + 8, &[5u32]);
    assert_eq!(download::<u32>(base + 8, 1), [5]);
    // SAFETY: the mapping, handle and reservation made above, released once.
    unsafe {
        ok(cuMemUnmap(base, G));
        ok(cuMemRelease(h));
        ok(cuMemAddressFree(base, 2 * G));
    }
}
