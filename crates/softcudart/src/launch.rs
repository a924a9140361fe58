//! Kernel launches. `kernel<<<grid, block, shared, stream>>>(args)` compiles to
//! `__cudaPushCallConfiguration(grid, block, shared, stream)` followed by a call of the kernel's
//! host stub, which pops that configuration (`__cudaPopCallConfiguration`), finds its kernel
//! (`__cudaGetKernel`, once per stub) and launches it (`__cudaLaunchKernel`); `cudaLaunchKernel`
//! takes the stub's address directly. Either way the launch is the driver's `cuLaunchKernel` of
//! the kernel's function in the current context.

use std::cell::RefCell;
use std::ffi::{c_int, c_uint, c_void};

use crate::driver::{Driver, Handle};
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

/// Device attributes that bound a launch: max threads per block, max block x/y/z, max grid
/// x/y/z (`CU_DEVICE_ATTRIBUTE_*` 1 to 7).
const LIMIT_ATTRIBUTES: [c_int; 7] = [1, 2, 3, 4, 5, 6, 7];

/// Launches `kernel` (a `CUkernel`) in the current context. `args` is the kernel's parameter
/// array as the driver takes it (`kernelParams`).
pub(crate) fn launch(kernel: Handle, config: Config, args: *mut *mut c_void) -> Result<(), Rt> {
    if kernel.is_null() {
        return Err(registry::missing_kernel());
    }
    let Config {
        grid,
        block,
        shared,
        stream,
    } = config;
    if [grid.x, grid.y, grid.z, block.x, block.y, block.z].contains(&0) {
        return Err(code::INVALID_CONFIGURATION);
    }
    let shared = c_uint::try_from(shared).map_err(|_| code::INVALID_VALUE)?;
    let d = context::current()?;
    let mut f: Handle = std::ptr::null_mut();
    // SAFETY: `f` is a valid out-pointer; the driver checks the kernel handle, and a context is
    // current (the function is this context's instance of the kernel).
    check(unsafe { (d.cuKernelGetFunction)(&mut f, kernel) })?;
    // SAFETY: `f` is a function of the current context; `args` is the program's parameter
    // array, which the driver reads as the kernel's signature says (the C API's contract); no
    // `extra`.
    let r = check(unsafe {
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
    });
    match r {
        Err(code::INVALID_VALUE) if beyond_limits(d, grid, block) => {
            Err(code::INVALID_CONFIGURATION)
        }
        r => r,
    }
}

/// Whether the dimensions exceed what the current device allows: NVIDIA's runtime reports that
/// as `cudaErrorInvalidConfiguration`, where the driver says only "invalid value".
fn beyond_limits(d: &Driver, grid: Dim3, block: Dim3) -> bool {
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; a context is current.
    if check(unsafe { (d.cuCtxGetDevice)(&mut dev) }).is_err() {
        return false;
    }
    let mut limits = [0 as c_int; 7];
    for (limit, attr) in limits.iter_mut().zip(LIMIT_ATTRIBUTES) {
        // SAFETY: `limit` is a valid out-pointer, `dev` a device from the driver.
        if check(unsafe { (d.cuDeviceGetAttribute)(limit, attr, dev) }).is_err() {
            return false;
        }
    }
    let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
    let asked = [
        threads,
        block.x.into(),
        block.y.into(),
        block.z.into(),
        grid.x.into(),
        grid.y.into(),
        grid.z.into(),
    ];
    asked
        .iter()
        .zip(limits)
        .any(|(&a, l)| a > u64::try_from(l).unwrap_or(0))
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
    fn a_zero_dimension_is_an_invalid_configuration_before_any_driver_call() {
        let k = 0x30 as Handle;
        let mut c = config(1);
        c.block.z = 0;
        assert_eq!(
            launch(k, c, std::ptr::null_mut()),
            Err(code::INVALID_CONFIGURATION)
        );
    }
}
