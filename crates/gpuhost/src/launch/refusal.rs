//! Why the driver refused a launch that passed the device's limits: the kernel's own compiled
//! limits are tighter than the device's. Its registers per thread (or its `.maxntid`) cap the
//! threads a block may have below the device's 1024, and its static shared memory leaves less
//! than the device's per-block limit for dynamic shared memory. NVIDIA's driver answers with a
//! bare code: `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` ("too many resources requested for launch")
//! for a block its registers cannot hold, `CUDA_ERROR_INVALID_VALUE` for one beyond its
//! `.maxntid` (the H200, session 42); too much shared memory is one of the two. This names the
//! limit and the kernel's figure, so the caller can act on it. It matters beside the PTX
//! sandbox too: a rewritten kernel may use more registers than the one its author compiled, so
//! a block size that fit natively can stop fitting.
//!
//! Only the failure path pays for it: the launch path checks nothing more, and the kernel's
//! attributes are read once a launch has already failed.

use cudarc::driver::sys::{CUfunction_attribute as A, CUresult};

use crate::error::Error;
use crate::registry::Kernel;
use crate::result::{self, DriverError};

use super::LaunchConfig;

/// The kernel limit that explains `e`, the driver's refusal of launching `kernel` with `cfg`,
/// as [`Error::InvalidLaunch`]; None when no limit of the kernel's does (the caller reports `e`
/// as it is). The context of `kernel` is bound on this thread.
#[cold]
#[inline(never)]
pub(crate) fn kernel_limit(kernel: &Kernel, cfg: &LaunchConfig, e: DriverError) -> Option<Error> {
    if !(e.is(CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
        || e.is(CUresult::CUDA_ERROR_INVALID_VALUE))
    {
        return None;
    }
    // SAFETY: the caller's launch entered the kernel's host and checked its generation, so the
    // function is live in the context bound on this thread.
    let attr = |a| unsafe { result::module::attribute(kernel.raw(), a) }.ok();
    let threads: u64 = cfg.block.iter().map(|&d| u64::from(d)).product();
    let reason = if let Some(max) = attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        .filter(|&max| threads > u64::try_from(max).unwrap_or(0))
    {
        let registers = attr(A::CU_FUNC_ATTRIBUTE_NUM_REGS)
            .map(|r| format!(" (it uses {r} registers per thread)"))
            .unwrap_or_default();
        format!(
            "block {:?} has {threads} threads, but this kernel allows at most {max} per block on \
             this device{registers}; launch blocks of at most {max} threads, or compile the \
             kernel for the block size (`.maxntid` / `__launch_bounds__` makes it fit its \
             registers)",
            cfg.block
        )
    } else if let Some(max) = attr(A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        .filter(|&max| u64::from(cfg.shared_mem_bytes) > u64::try_from(max).unwrap_or(0))
    {
        let fixed = attr(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            .map(|s| format!(" beside its {s} bytes of static shared memory"))
            .unwrap_or_default();
        format!(
            "{} bytes of dynamic shared memory exceed the {max} this kernel may use{fixed}; \
             ask for at most {max}",
            cfg.shared_mem_bytes
        )
    } else {
        return None;
    };
    Some(Error::InvalidLaunch {
        kernel: kernel.name().to_string(),
        reason,
    })
}
