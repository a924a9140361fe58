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
