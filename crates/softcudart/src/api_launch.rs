//! Exported entry points nvcc's generated host code calls: fatbin and kernel registration at
//! program start and exit, the `<<<>>>` configuration stack, kernel lookup and launch; and the
//! public `cudaLaunchKernel`.
//!
//! # Safety (all functions here)
//! Each pointer argument is NULL or valid as the CUDA runtime API documents it; NULL out-pointers
//! are `cudaErrorInvalidValue`.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::driver::Handle;
use crate::launch::{self, Config, Dim3, LaunchConfig};
use crate::registry::{self, Symbol};
use crate::status::{api, code, put};

/// Records a translation unit's fatbin; returns the handle its later calls pass back.
pub(crate) unsafe extern "C" fn __cudaRegisterFatBinary(fat: *mut c_void) -> *mut *mut c_void {
    // SAFETY: nvcc passes its `__fatBinC_Wrapper_t` (the contract above).
    std::panic::catch_unwind(|| unsafe { registry::register_fatbin(fat) })
        .unwrap_or(std::ptr::null_mut())
}

/// Ends a fatbin's registration. Nothing to do: modules load on first use.
pub(crate) unsafe extern "C" fn __cudaRegisterFatBinaryEnd(_handle: *mut *mut c_void) {}

/// Forgets a fatbin at exit (the program registers this with `atexit`).
pub(crate) unsafe extern "C" fn __cudaUnregisterFatBinary(handle: *mut *mut c_void) {
    let _ = std::panic::catch_unwind(|| registry::unregister_fatbin(handle));
}

/// Records a kernel: its host stub `host` and its device name. The other arguments are unused
/// by nvcc's code (`-1` and NULLs).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn __cudaRegisterFunction(
    handle: *mut *mut c_void,
    host: *const c_char,
    _device_fun: *mut c_char,
    name: *const c_char,
    _thread_limit: c_int,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block: *mut c_void,
    _grid: *mut c_void,
    _warp_size: *mut c_int,
) {
    // SAFETY: `name` is NULL or the kernel's NUL-terminated name (the contract above).
    unsafe { record(Symbol::Kernel, handle, host, name) }
}

/// [`registry::register`], never unwinding into the program's start-up code.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn record(
    symbol: Symbol,
    handle: *mut *mut c_void,
    host: *const c_char,
    name: *const c_char,
) {
    // SAFETY: the caller's contract.
    let _ = std::panic::catch_unwind(|| unsafe { registry::register(symbol, handle, host, name) });
}

/// Records a `__device__` or `__constant__` variable: its host shadow `host` and device name.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn __cudaRegisterVar(
    handle: *mut *mut c_void,
    host: *const c_char,
    _device_address: *mut c_char,
    name: *const c_char,
    _ext: c_int,
    _size: usize,
    _constant: c_int,
    _global: c_int,
) {
    // SAFETY: `name` is NULL or the variable's NUL-terminated name (the contract above).
    unsafe { record(Symbol::Variable, handle, host, name) }
}

/// Records a `__managed__` variable: the address of the host pointer nvcc's code reaches it
/// through (set when the fatbin loads) and its device name.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn __cudaRegisterManagedVar(
    handle: *mut *mut c_void,
    host_pointer: *mut *mut c_void,
    _device_address: *mut c_char,
    name: *const c_char,
    _ext: c_int,
    _size: usize,
    _constant: c_int,
    _global: c_int,
) {
    let host = host_pointer.cast_const().cast();
    // SAFETY: `name` is NULL or the variable's NUL-terminated name (the contract above).
    unsafe { record(Symbol::Managed, handle, host, name) }
}

/// Loads the fatbin's module now (and points its managed variables' host pointers at them); 1
/// on success, 0 on failure (its error is the last error).
pub(crate) unsafe extern "C" fn __cudaInitModule(handle: *mut *mut c_void) -> c_char {
    c_char::from(api(|| registry::init_module(handle)) == 0)
}

/// The `<<<grid, block, shared, stream>>>` of a launch; 0 lets the stub run.
pub(crate) unsafe extern "C" fn __cudaPushCallConfiguration(
    grid: Dim3,
    block: Dim3,
    shared: usize,
    stream: Handle,
) -> c_uint {
    let r = api(|| launch::push(Config::new(grid, block, shared, stream)));
    c_uint::from(r != 0)
}

/// Hands the stub the configuration pushed for it.
pub(crate) unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared: *mut usize,
    stream: *mut Handle,
) -> c_int {
    api(|| {
        if grid.is_null() || block.is_null() || shared.is_null() || stream.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let config = launch::pop()?;
        // SAFETY: the four out-pointers are non-NULL and valid (the contract above).
        unsafe {
            put(grid, config.grid)?;
            put(block, config.block)?;
            put(shared, config.shared)?;
            put(stream, config.stream)
        }
    })
}

/// The kernel handle (`cudaKernel_t`, a driver `CUkernel`) of the host stub `host`.
pub(crate) unsafe extern "C" fn __cudaGetKernel(out: *mut Handle, host: *const c_void) -> c_int {
    api(|| {
        if out.is_null() {
            return Err(code::INVALID_VALUE);
        }
        let k = registry::kernel(host)?;
        // SAFETY: `out` is non-NULL and valid (the contract above).
        unsafe { put(out, k) }
    })
}

/// Launches a kernel found by `__cudaGetKernel`.
pub(crate) unsafe extern "C" fn __cudaLaunchKernel(
    kernel: Handle,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> c_int {
    api(|| {
        let config = Config::new(grid, block, shared, stream);
        launch::launch(kernel, config, args)
    })
}

/// Launches the kernel whose host stub is `func`.
pub(crate) unsafe extern "C" fn cudaLaunchKernel(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared: usize,
    stream: Handle,
) -> c_int {
    api(|| {
        let kernel = registry::kernel(func)?;
        let config = Config::new(grid, block, shared, stream);
        launch::launch(kernel, config, args)
    })
}

/// Launches the kernel whose host stub is `func` with a launch configuration that may carry
/// launch attributes (what NVIDIA's `cudaLaunchKernelEx` template calls).
pub(crate) unsafe extern "C" fn cudaLaunchKernelExC(
    config: *const LaunchConfig,
    func: *const c_void,
    args: *mut *mut c_void,
) -> c_int {
    api(|| {
        if config.is_null() {
            return Err(code::INVALID_VALUE);
        }
        // SAFETY: non-NULL, so a `cudaLaunchConfig_t` (the contract above).
        let c = unsafe { config.read_unaligned() };
        let kernel = registry::kernel(func)?;
        let attributes = (c.count > 0).then_some((c.attrs, c.count));
        let launch = Config::new(c.grid, c.block, c.shared, c.stream);
        launch::launch_with(kernel, launch, attributes, args)
    })
}
