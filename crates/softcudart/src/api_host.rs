//! Exported entry points for host memory the device reaches and for what an address is:
//! registering and unregistering host memory, its device address, `cudaPointerGetAttributes`,
//! and copies between devices (`cudaMemcpyPeer`, each side in its device's primary context).
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it (registered host
//! memory for the bytes given); NULL out-pointers are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use crate::context;
use crate::driver::{DevPtr, Handle};
use crate::status::{Rt, api, check, code, put};

/// Page-locks `size` bytes of host memory at `ptr` and maps them for the device
/// (`cudaHostRegister*` flags, the driver's `CU_MEMHOSTREGISTER_*` values).
pub(crate) unsafe extern "C" fn cudaHostRegister(
    ptr: *mut c_void,
    size: usize,
    flags: c_uint,
) -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: `ptr` holds `size` bytes of the program's memory (the contract above); the
        // driver checks the range and the flags.
        check(unsafe { (d.cuMemHostRegister_v2)(ptr, size, flags) })
    })
}

/// Forgets a registration (the memory stays the program's).
pub(crate) unsafe extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> c_int {
    api(|| {
        let d = context::current()?;
        // SAFETY: the driver checks that `ptr` starts a registration.
        check(unsafe { (d.cuMemHostUnregister)(ptr) })
    })
}

/// The device address of mapped host memory (`flags` must be 0).
pub(crate) unsafe extern "C" fn cudaHostGetDevicePointer(
    device: *mut *mut c_void,
    host: *mut c_void,
    flags: c_uint,
) -> c_int {
    // SAFETY: `device` is NULL or valid (the contract above); the closure's pointer is valid;
    // the driver checks `host` and the flags.
    api(|| unsafe {
        context::create_address(device, |d, p| {
            (d.cuMemHostGetDevicePointer_v2)(p, host, flags)
        })
    })
}

/// CUDA 13.0's `struct cudaPointerAttributes`.
#[repr(C)]
pub(crate) struct PointerAttributes {
    kind: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    reserved: [std::ffi::c_long; 8],
}

// Measured from CUDA 13.0's driver_types.h with a C compiler.
const _: () = assert!(std::mem::size_of::<PointerAttributes>() == 88);

/// `cudaMemoryType`.
const UNREGISTERED: c_int = 0;
const HOST: c_int = 1;
const DEVICE: c_int = 2;
const MANAGED: c_int = 3;

/// The `CU_POINTER_ATTRIBUTE_*` read, in this order: memory type, device pointer, host pointer,
/// is managed, device ordinal.
const ATTRIBUTES: [c_int; 5] = [2, 3, 4, 8, 9];

/// What the runtime says of `ptr`: memory the driver does not know is "unregistered" (and
/// success, as runtimes since CUDA 11 answer); managed memory is reachable at one address from
/// both sides; host memory has the device address it is mapped at.
pub(crate) unsafe extern "C" fn cudaPointerGetAttributes(
    attributes: *mut PointerAttributes,
    ptr: *const c_void,
) -> c_int {
    api(|| {
        if attributes.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = context::current()?;
        // Each slot is zeroed and wide enough for any of the attributes' types (4 or 8 bytes,
        // little-endian), so one the driver leaves unwritten reads as 0 / NULL.
        let mut slots = [0u64; ATTRIBUTES.len()];
        let mut outs = slots
            .each_mut()
            .map(|s| std::ptr::from_mut(s).cast::<c_void>());
        // SAFETY: five attributes, five valid 8-byte out-slots; an address the driver does not
        // know leaves zeroed slots and succeeds (cuPointerGetAttributes's contract).
        check(unsafe {
            (d.cuPointerGetAttributes)(
                ATTRIBUTES.len() as c_uint,
                ATTRIBUTES.as_ptr(),
                outs.as_mut_ptr(),
                ptr as DevPtr,
            )
        })?;
        let [memory_type, device_pointer, host_pointer, managed, ordinal] = slots;
        let kind = match (memory_type, managed != 0) {
            (_, true) => MANAGED,
            (1, false) => HOST,
            (2, false) => DEVICE,
            _ => UNREGISTERED,
        };
        let known = kind != UNREGISTERED;
        let a = PointerAttributes {
            kind,
            device: if known { ordinal as c_int } else { -2 },
            device_pointer: if known {
                device_pointer as *mut c_void
            } else {
                std::ptr::null_mut()
            },
            host_pointer: if known {
                host_pointer as *mut c_void
            } else {
                std::ptr::null_mut()
            },
            reserved: [0; 8],
        };
        // SAFETY: the contract above.
        unsafe { put(attributes, a) }
    })
}

/// Copies `count` bytes from `src` on device `src_device` to `dst` on device `dst_device`, on
/// `stream` (`None`: the synchronous form).
fn peer_copy(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    count: usize,
    stream: Option<Handle>,
) -> Result<(), Rt> {
    let d = context::current()?;
    let dst_ctx = context::primary_context(d, dst_device)?;
    let src_ctx = context::primary_context(d, src_device)?;
    if count == 0 {
        return Ok(());
    }
    let (dst, src) = (dst as DevPtr, src as DevPtr);
    // SAFETY: plain values; the driver checks both ranges, contexts and the stream.
    check(unsafe {
        match stream {
            None => (d.cuMemcpyPeer)(dst, dst_ctx, src, src_ctx, count),
            Some(s) => (d.cuMemcpyPeerAsync)(dst, dst_ctx, src, src_ctx, count, s),
        }
    })
}

/// Copies between devices.
pub(crate) unsafe extern "C" fn cudaMemcpyPeer(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    count: usize,
) -> c_int {
    api(|| peer_copy(dst, dst_device, src, src_device, count, None))
}

/// Copies between devices on `stream`.
pub(crate) unsafe extern "C" fn cudaMemcpyPeerAsync(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    count: usize,
    stream: Handle,
) -> c_int {
    api(|| peer_copy(dst, dst_device, src, src_device, count, Some(stream)))
}

/// Whether `device` can reach `peer`'s memory (never a device itself, as the driver answers).
pub(crate) unsafe extern "C" fn cudaDeviceCanAccessPeer(
    can: *mut c_int,
    device: c_int,
    peer: c_int,
) -> c_int {
    api(|| {
        if can.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let d = crate::driver::driver()?;
        let (dev, peer) = (
            context::device_handle(d, device)?,
            context::device_handle(d, peer)?,
        );
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer; both are devices from the driver.
        check(unsafe { (d.cuDeviceCanAccessPeer)(&mut v, dev, peer) })?;
        // SAFETY: the contract above.
        unsafe { put(can, v) }
    })
}
