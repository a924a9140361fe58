//! The driver this runtime runs on: `libcuda.so.1`, opened the way NVIDIA's runtime opens it (by
//! that name, so `LD_LIBRARY_PATH` or the system's loader path decide which driver: NVIDIA's or
//! softcuda's). Every entry point used is resolved once into [`Driver`]; a missing one means the
//! driver is too old for this runtime (`cudaErrorInsufficientDriver`), as does a version below
//! 13.0. Driver results stay raw `i32`s here: a code this crate does not know must not become an
//! out-of-range Rust enum.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use crate::status::{Rt, check, code};

/// A driver-API result (`CUresult`), raw.
pub(crate) type CuResult = c_int;
/// A driver handle (`CUcontext`, `CUstream`, `CUevent`, `CUlibrary`, `CUkernel`, `CUfunction`).
pub(crate) type Handle = *mut c_void;
/// A device address (`CUdeviceptr`).
pub(crate) type DevPtr = u64;

/// The driver name NVIDIA's runtime loads.
const DRIVER_FILE: &core::ffi::CStr = c"libcuda.so.1";
/// The lowest driver version this runtime accepts (it implements CUDA 13.0's runtime).
pub(crate) const RUNTIME_VERSION: c_int = 13000;

macro_rules! driver_table {
    ($($name:ident ( $($arg:ty),* ) $(or $alt:ident)?;)*) => {
        /// The driver entry points this runtime calls, resolved from the loaded libcuda.
        #[allow(non_snake_case)]
        pub(crate) struct Driver {
            $(pub(crate) $name: unsafe extern "C" fn($($arg),*) -> CuResult,)*
        }

        impl Driver {
            /// Resolves every entry point in `lib`, or names the first one missing.
            ///
            /// # Safety
            /// `lib` is a live handle from `dlopen` of a libcuda, whose symbols have the
            /// signatures `cuda.h` gives them.
            unsafe fn resolve(lib: *mut c_void) -> Result<Driver, &'static str> {
                Ok(Driver {
                    $($name: {
                        // SAFETY: `lib` is live (the caller's contract); the name is
                        // NUL-terminated.
                        #[allow(unused_mut)]
                        let mut p = unsafe {
                            libc::dlsym(lib, concat!(stringify!($name), "\0").as_ptr().cast())
                        };
                        $(if p.is_null() {
                            // SAFETY: as above, for the older name of the same call.
                            p = unsafe {
                                libc::dlsym(lib, concat!(stringify!($alt), "\0").as_ptr().cast())
                            };
                        })?
                        if p.is_null() {
                            return Err(stringify!($name));
                        }
                        // SAFETY: the symbol is this driver call, whose C signature is the
                        // function type of this field (cuda.h).
                        unsafe {
                            std::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn($($arg),*) -> CuResult,
                            >(p)
                        }
                    },)*
                })
            }
        }
    };
}

driver_table! {
    cuInit(c_uint);
    cuDriverGetVersion(*mut c_int);
    cuDeviceGetCount(*mut c_int);
    cuDeviceGet(*mut c_int, c_int);
    cuDeviceGetAttribute(*mut c_int, c_int, c_int);
    cuDeviceGetName(*mut c_char, c_int, c_int);
    cuDeviceGetUuid_v2(*mut u8, c_int) or cuDeviceGetUuid;
    cuDeviceTotalMem_v2(*mut usize, c_int);
    cuDevicePrimaryCtxRetain(*mut Handle, c_int);
    cuDevicePrimaryCtxRelease_v2(c_int);
    cuDevicePrimaryCtxReset_v2(c_int);
    cuCtxGetCurrent(*mut Handle);
    cuCtxSetCurrent(Handle);
    cuCtxGetDevice(*mut c_int);
    cuCtxSynchronize();
    cuMemAlloc_v2(*mut DevPtr, usize);
    cuMemFree_v2(DevPtr);
    cuMemAllocHost_v2(*mut *mut c_void, usize);
    cuMemAllocManaged(*mut DevPtr, usize, c_uint);
    cuMemHostAlloc(*mut *mut c_void, usize, c_uint);
    cuMemFreeHost(*mut c_void);
    cuMemGetInfo_v2(*mut usize, *mut usize);
    cuMemcpy(DevPtr, DevPtr, usize);
    cuMemcpyHtoD_v2(DevPtr, *const c_void, usize);
    cuMemcpyDtoH_v2(*mut c_void, DevPtr, usize);
    cuMemcpyDtoD_v2(DevPtr, DevPtr, usize);
    cuMemcpyAsync(DevPtr, DevPtr, usize, Handle);
    cuMemcpyHtoDAsync_v2(DevPtr, *const c_void, usize, Handle);
    cuMemcpyDtoHAsync_v2(*mut c_void, DevPtr, usize, Handle);
    cuMemcpyDtoDAsync_v2(DevPtr, DevPtr, usize, Handle);
    cuMemsetD8_v2(DevPtr, u8, usize);
    cuMemsetD8Async(DevPtr, u8, usize, Handle);
    cuLibraryLoadData(
        *mut Handle,
        *const c_void,
        *mut c_int,
        *mut *mut c_void,
        c_uint,
        *mut c_int,
        *mut *mut c_void,
        c_uint
    );
    cuLibraryUnload(Handle);
    cuLibraryGetKernel(*mut Handle, Handle, *const c_char);
    cuLibraryGetGlobal(*mut DevPtr, *mut usize, Handle, *const c_char);
    cuLibraryGetManaged(*mut DevPtr, *mut usize, Handle, *const c_char);
    cuKernelGetFunction(*mut Handle, Handle);
    cuLaunchKernel(
        Handle,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Handle,
        *mut *mut c_void,
        *mut *mut c_void
    );
    cuStreamCreate(*mut Handle, c_uint);
    cuStreamDestroy_v2(Handle);
    cuStreamSynchronize(Handle);
    cuStreamQuery(Handle);
    cuStreamWaitEvent(Handle, Handle, c_uint);
    cuEventCreate(*mut Handle, c_uint);
    cuEventDestroy_v2(Handle);
    cuEventRecord(Handle, Handle);
    cuEventSynchronize(Handle);
    cuEventQuery(Handle);
    cuEventElapsedTime_v2(*mut f32, Handle, Handle) or cuEventElapsedTime;
    // Device flags, limits, stream priorities, event flags, host functions.
    cuDevicePrimaryCtxSetFlags_v2(c_int, c_uint);
    cuDevicePrimaryCtxGetState(c_int, *mut c_uint, *mut c_int);
    cuCtxGetFlags(*mut c_uint);
    cuCtxGetLimit(*mut usize, c_int);
    cuCtxSetLimit(c_int, usize);
    cuCtxGetStreamPriorityRange(*mut c_int, *mut c_int);
    cuStreamCreateWithPriority(*mut Handle, c_uint, c_int);
    cuStreamGetFlags(Handle, *mut c_uint);
    cuStreamGetPriority(Handle, *mut c_int);
    cuEventRecordWithFlags(Handle, Handle, c_uint);
    cuLaunchHostFunc(Handle, Handle, *mut c_void);
    // Capture and graphs.
    cuStreamBeginCapture_v2(Handle, c_int);
    cuStreamEndCapture(Handle, *mut Handle);
    cuStreamIsCapturing(Handle, *mut c_int);
    cuGraphCreate(*mut Handle, c_uint);
    cuGraphAddKernelNode_v2(*mut Handle, Handle, *const Handle, usize, *const KernelNodeParams);
    cuGraphExecKernelNodeSetParams_v2(Handle, Handle, *const KernelNodeParams);
    cuGraphInstantiateWithFlags(*mut Handle, Handle, u64);
    cuGraphLaunch(Handle, Handle);
    cuGraphExecDestroy(Handle);
    cuGraphDestroy(Handle);
    // Stream-ordered allocation.
    cuMemAllocAsync(*mut DevPtr, usize, Handle);
    cuMemFreeAsync(DevPtr, Handle);
    cuDeviceGetDefaultMemPool(*mut Handle, c_int);
    cuMemPoolSetAttribute(Handle, c_int, *mut c_void);
    cuMemPoolGetAttribute(Handle, c_int, *mut c_void);
    cuMemPoolTrimTo(Handle, usize);
    // Function attributes and occupancy.
    cuFuncGetAttribute(*mut c_int, c_int, Handle);
    cuKernelSetAttribute(c_int, c_int, Handle, c_int);
    cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(*mut c_int, Handle, c_int, usize, c_uint);
    cuOccupancyAvailableDynamicSMemPerBlock(*mut usize, Handle, c_int, c_int);
    // Pitched memory, host registration, pointer attributes, peer copies.
    cuMemAllocPitch_v2(*mut DevPtr, *mut usize, usize, usize, c_uint);
    cuMemcpy2D_v2(*const Memcpy2D);
    cuMemcpy2DAsync_v2(*const Memcpy2D, Handle);
    cuMemHostRegister_v2(*mut c_void, usize, c_uint);
    cuMemHostUnregister(*mut c_void);
    cuMemHostGetDevicePointer_v2(*mut DevPtr, *mut c_void, c_uint);
    cuPointerGetAttributes(c_uint, *const c_int, *mut *mut c_void, DevPtr);
    cuMemcpyPeer(DevPtr, Handle, DevPtr, Handle, usize);
    cuMemcpyPeerAsync(DevPtr, Handle, DevPtr, Handle, usize, Handle);
    cuDeviceCanAccessPeer(*mut c_int, c_int, c_int);
    // Callbacks, cache preferences, the profiler, graph upload, capture modes.
    cuStreamAddCallback(Handle, Handle, *mut c_void, c_uint);
    cuKernelSetCacheConfig(Handle, c_int, c_int);
    cuCtxSetCacheConfig(c_int);
    cuCtxGetCacheConfig(*mut c_int);
    cuProfilerStart();
    cuProfilerStop();
    cuGraphUpload(Handle, Handle);
    cuThreadExchangeStreamCaptureMode(*mut c_int);
    cuLaunchKernelEx(*const DriverLaunchConfig, Handle, *mut *mut c_void, *mut *mut c_void);
    cuStreamGetCaptureInfo_v3(
        Handle,
        *mut c_int,
        *mut u64,
        *mut Handle,
        *mut *const Handle,
        *mut *const c_void,
        *mut usize
    );
}

/// `CUDA_KERNEL_NODE_PARAMS` (the CUDA 12 layout, `_v2`): a graph kernel node's launch.
#[repr(C)]
pub(crate) struct KernelNodeParams {
    pub(crate) func: Handle,
    pub(crate) grid: [c_uint; 3],
    pub(crate) block: [c_uint; 3],
    pub(crate) shared: c_uint,
    pub(crate) params: *mut *mut c_void,
    pub(crate) extra: *mut *mut c_void,
    /// Used only when `func` is NULL; this runtime always sets `func`.
    pub(crate) kern: Handle,
    pub(crate) ctx: Handle,
}

/// `CUDA_MEMCPY2D` (`_v2`, size_t fields): one side of a 2D copy is (memory type, host
/// pointer, device address, array, pitch) after its X and Y offsets.
#[repr(C)]
pub(crate) struct Memcpy2D {
    pub(crate) src_x: usize,
    pub(crate) src_y: usize,
    pub(crate) src_type: c_int,
    pub(crate) src_host: *const c_void,
    pub(crate) src_device: DevPtr,
    pub(crate) src_array: Handle,
    pub(crate) src_pitch: usize,
    pub(crate) dst_x: usize,
    pub(crate) dst_y: usize,
    pub(crate) dst_type: c_int,
    pub(crate) dst_host: *mut c_void,
    pub(crate) dst_device: DevPtr,
    pub(crate) dst_array: Handle,
    pub(crate) dst_pitch: usize,
    pub(crate) width: usize,
    pub(crate) height: usize,
}

/// The opened driver, or the runtime error every call reports when it cannot be used.
static LOADED: OnceLock<Result<Driver, Rt>> = OnceLock::new();
/// `cuInit` and the version check, done once (the driver remembers a failed `cuInit` too).
static INITIALISED: OnceLock<Result<(), Rt>> = OnceLock::new();

/// The driver, opened and resolved but not necessarily initialised: enough for
/// `cudaDriverGetVersion`. No libcuda, or one lacking an entry point this runtime calls, is
/// `cudaErrorInsufficientDriver`, NVIDIA's runtime's answer where no usable driver is installed.
pub(crate) fn loaded() -> Result<&'static Driver, Rt> {
    LOADED
        .get_or_init(|| {
            // SAFETY: a constant NUL-terminated name; dlopen has no other precondition.
            let lib = unsafe { libc::dlopen(DRIVER_FILE.as_ptr(), libc::RTLD_NOW) };
            if lib.is_null() {
                return Err(code::INSUFFICIENT_DRIVER);
            }
            // SAFETY: `lib` was just opened and is never closed; it is a libcuda by name.
            unsafe { Driver::resolve(lib) }.map_err(|_missing| code::INSUFFICIENT_DRIVER)
        })
        .as_ref()
        .map_err(|e| *e)
}

/// The driver, initialised (`cuInit(0)`) and at least CUDA 13.0: what every call that touches a
/// device needs first.
pub(crate) fn driver() -> Result<&'static Driver, Rt> {
    let d = loaded()?;
    INITIALISED
        .get_or_init(|| {
            // SAFETY: cuInit takes flags by value.
            check(unsafe { (d.cuInit)(0) })?;
            let mut version = 0;
            // SAFETY: `version` is a valid out-pointer.
            check(unsafe { (d.cuDriverGetVersion)(&mut version) })?;
            if version < RUNTIME_VERSION {
                return Err(code::INSUFFICIENT_DRIVER);
            }
            Ok(())
        })
        .map(|()| d)
}

/// `CUlaunchConfig`: a launch's configuration and attributes (`cuLaunchKernelEx`).
#[repr(C)]
pub(crate) struct DriverLaunchConfig {
    pub(crate) grid: [c_uint; 3],
    pub(crate) block: [c_uint; 3],
    pub(crate) shared: c_uint,
    pub(crate) stream: Handle,
    pub(crate) attrs: *mut c_void,
    pub(crate) count: c_uint,
}
