//! The entry points softcuda does not implement (a part of [`super`]'s list kept apart for
//! size): each answers `CUDA_ERROR_NOT_SUPPORTED`, so a program learns of the gap instead of
//! failing to find the symbol.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_int, c_uint, c_void};

use cudarc::driver::sys::{CUdeviceptr, CUfunction, CUstream};

/// `CUmemLocation` passed by value, with its enum field as a raw integer (a foreign value outside
/// the Rust enum would be undefined behaviour); only ever ignored.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawMemLocation {
    /// `CUmemLocationType`.
    pub kind: c_uint,
    /// Device ordinal or NUMA node.
    pub id: c_int,
}

// Pool IPC, external memory, cooperative and cluster launches and
// managed-memory hints: the device attributes report them unsupported as well.
unsupported! {
    cuMemPoolExportToShareableHandle(handle: *mut c_void, pool: *mut c_void, kind: c_uint, flags: u64);
    cuMemPoolImportFromShareableHandle(pool: *mut *mut c_void, handle: *mut c_void, kind: c_uint, flags: u64);
    cuMemPoolExportPointer(data: *mut c_void, ptr: CUdeviceptr);
    cuMemPoolImportPointer(ptr: *mut CUdeviceptr, pool: *mut c_void, data: *mut c_void);
    cuImportExternalMemory(out: *mut *mut c_void, desc: *const c_void);
    cuExternalMemoryGetMappedBuffer(dptr: *mut CUdeviceptr, mem: *mut c_void, desc: *const c_void);
    cuDestroyExternalMemory(mem: *mut c_void);
    cuLaunchCooperativeKernel(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, shared: c_uint, stream: CUstream, params: *mut *mut c_void);
    cuOccupancyMaxActiveClusters(n: *mut c_int, f: CUfunction, config: *const c_void);
    cuOccupancyMaxPotentialClusterSize(n: *mut c_int, f: CUfunction, config: *const c_void);
    cuMemAdvise_v2(ptr: CUdeviceptr, count: usize, advice: c_uint, location: RawMemLocation);
    cuMemPrefetchAsync_v2(ptr: CUdeviceptr, count: usize, location: RawMemLocation, flags: c_uint, stream: CUstream);
}
