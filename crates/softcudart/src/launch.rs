//! Kernel launches. `kernel<<<grid, block, shared, stream>>>(args)` compiles to
//! `__cudaPushCallConfiguration(grid, block, shared, stream)` followed by a call of the kernel's
//! host stub, which pops that configuration (`__cudaPopCallConfiguration`), finds its kernel
//! (`__cudaGetKernel`, once per stub) and launches it (`__cudaLaunchKernel`); `cudaLaunchKernel`
//! takes the stub's address directly. Either way the launch is the driver's `cuLaunchKernel` of
//! the kernel's function in the current context.

use std::cell::RefCell;
use std::ffi::{c_uint, c_void};

use crate::driver::{DriverLaunchConfig, Handle};
use crate::status::{Rt, check, code};
use crate::{context, registry};

/// CUDA's `dim3`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dim3 {
    pub(crate) x: c_uint,
    pub(crate) y: c_uint,
    pub(crate) z: c_uint,
}

/// One launch configuration: `<<<grid, block, shared, stream>>>`.
#[derive(Clone, Copy)]
pub(crate) struct Config {
    pub(crate) grid: Dim3,
    pub(crate) block: Dim3,
    pub(crate) shared: usize,
    pub(crate) stream: Handle,
}

impl Config {
    pub(crate) fn new(grid: Dim3, block: Dim3, shared: usize, stream: Handle) -> Config {
        Config {
            grid,
            block,
            shared,
            stream,
        }
    }
}

/// The deepest the configuration stack may grow: nvcc pops every push, and a launch's
/// arguments may themselves launch, but never this deep.
const MAX_PUSHED: usize = 1024;

thread_local! {
    /// This thread's pushed configurations, innermost last.
    static PUSHED: RefCell<Vec<Config>> = const { RefCell::new(Vec::new()) };
}

/// `__cudaPushCallConfiguration`.
pub(crate) fn push(config: Config) -> Result<(), Rt> {
    PUSHED.with_borrow_mut(|stack| {
        if stack.len() >= MAX_PUSHED {
            return Err(code::INVALID_CONFIGURATION);
        }
        stack.push(config);
        Ok(())
    })
}

/// `__cudaPopCallConfiguration`: a pop with nothing pushed is `cudaErrorMissingConfiguration`.
pub(crate) fn pop() -> Result<Config, Rt> {
    PUSHED
        .with_borrow_mut(Vec::pop)
        .ok_or(code::MISSING_CONFIGURATION)
}

/// `cudaLaunchConfig_t`: a launch configuration with launch attributes (`cudaLaunchAttribute`,
/// laid out and numbered as the driver's `CUlaunchAttribute`).
#[repr(C)]
pub(crate) struct LaunchConfig {
    pub(crate) grid: Dim3,
    pub(crate) block: Dim3,
    pub(crate) shared: usize,
    pub(crate) stream: Handle,
    pub(crate) attrs: *mut c_void,
    pub(crate) count: c_uint,
}

// Measured from CUDA 13.0's driver_types.h and cuda.h with a C compiler.
const _: () = assert!(std::mem::size_of::<LaunchConfig>() == 56);
const _: () = assert!(std::mem::size_of::<DriverLaunchConfig>() == 56);

/// Launch attributes as the driver takes them: the array and its length.
pub(crate) type Attributes = (*mut c_void, c_uint);

/// Launches `kernel` (a `CUkernel`) in the current context. `args` is the kernel's parameter
/// array as the driver takes it (`kernelParams`).
pub(crate) fn launch(kernel: Handle, config: Config, args: *mut *mut c_void) -> Result<(), Rt> {
    launch_with(kernel, config, None, args)
}

/// [`launch`], with launch attributes (`cudaLaunchKernelExC`) through `cuLaunchKernelEx`; the
/// attribute array is the program's, read by the driver during the call.
pub(crate) fn launch_with(
    kernel: Handle,
    config: Config,
    attributes: Option<Attributes>,
    args: *mut *mut c_void,
) -> Result<(), Rt> {
    if kernel.is_null() {
        return Err(registry::missing_kernel());
    }
    let Config {
        grid,
        block,
        shared,
        stream,
    } = config;
    // NVIDIA's runtime 13 answers a zero dimension, like one past the device's limits (which
    // the driver refuses), with cudaErrorInvalidValue, not cudaErrorInvalidConfiguration
    // (runtime_semantics.cu on the H200, bench/h200-runs/2026-12-02-s12/).
    if [grid.x, grid.y, grid.z, block.x, block.y, block.z].contains(&0) {
        return Err(code::INVALID_VALUE);
    }
    let shared = c_uint::try_from(shared).map_err(|_| code::INVALID_VALUE)?;
    let d = context::current()?;
    let mut f: Handle = std::ptr::null_mut();
    // SAFETY: `f` is a valid out-pointer; the driver checks the kernel handle, and a context is
    // current (the function is this context's instance of the kernel).
    check(unsafe { (d.cuKernelGetFunction)(&mut f, kernel) })?;
    if let Some((attrs, count)) = attributes {
        let driver_config = DriverLaunchConfig {
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            shared,
            stream,
            attrs,
            count,
        };
        // SAFETY: as below, and `driver_config` lives across the call, naming the program's
        // attribute array of `count` entries (the C API's contract).
        return check(unsafe {
            (d.cuLaunchKernelEx)(&raw const driver_config, f, args, std::ptr::null_mut())
        });
    }
    // SAFETY: `f` is a function of the current context; `args` is the program's parameter
    // array, which the driver reads as the kernel's signature says (the C API's contract); no
    // `extra`.
    check(unsafe {
        (d.cuLaunchKernel)(
            f,
            grid.x,
            grid.y,
            grid.z,
            block.x,
            block.y,
            block.z,
            shared,
            stream,
            args,
            std::ptr::null_mut(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(x: c_uint) -> Config {
        let dim = Dim3 { x, y: 1, z: 1 };
        Config::new(dim, dim, 0, std::ptr::null_mut())
    }

    #[test]
    fn configurations_pop_innermost_first_and_an_empty_pop_is_missing_configuration() {
        std::thread::spawn(|| {
            push(config(1)).unwrap();
            push(config(2)).unwrap();
            assert_eq!(pop().map(|c| c.grid.x), Ok(2));
            assert_eq!(pop().map(|c| c.grid.x), Ok(1));
            assert_eq!(pop().err(), Some(code::MISSING_CONFIGURATION));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_configuration_stack_is_capped() {
        std::thread::spawn(|| {
            for _ in 0..MAX_PUSHED {
                push(config(1)).unwrap();
            }
            assert_eq!(push(config(1)), Err(code::INVALID_CONFIGURATION));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_zero_dimension_is_an_invalid_value_before_any_driver_call() {
        let k = 0x30 as Handle;
        let mut c = config(1);
        c.block.z = 0;
        assert_eq!(launch(k, c, std::ptr::null_mut()), Err(code::INVALID_VALUE));
    }
}
