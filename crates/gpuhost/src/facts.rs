//! Device facts read from the driver (never hard-coded), and memory info.

use cudarc::driver::sys::{CUdevice, CUdevice_attribute as A};

use crate::error::Result;
use crate::result::ctx;

/// What a device is and what it allows, as its driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200" or "softcuda".
    pub name: String,
    /// (major, minor).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block dimension limits (x, y, z).
    pub max_block_dim: [u32; 3],
    /// Grid dimension limits (x, y, z).
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block without opt-in, bytes.
    pub max_shared_mem_per_block: u32,
    /// Warp size.
    pub warp_size: u32,
    /// Device memory, bytes.
    pub total_memory: u64,
    /// cuDriverGetVersion, e.g. 12080.
    pub driver_version: i32,
}

/// Free and total device memory, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// Free bytes.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
}

fn attr(dev: CUdevice, a: A) -> Result<u32> {
    // `dev` came from cuDeviceGet.
    Ok(ctx::attribute(dev, a)?.max(0) as u32)
}

impl DeviceFacts {
    /// Read every fact from the driver (needs an initialised driver, no context).
    pub(crate) fn read(ordinal: usize, dev: CUdevice, driver_version: i32) -> Result<Self> {
        // `dev` came from cuDeviceGet.
        let total = ctx::total_mem(dev)?;
        Ok(Self {
            ordinal,
            name: ctx::name(dev)?,
            compute_capability: (
                attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            sm_count: attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_mem_per_block: attr(
                dev,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            )?,
            warp_size: attr(dev, A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            total_memory: total as u64,
            driver_version,
        })
    }

    /// The cubin architecture tag matching this device, e.g. "sm_90".
    pub fn sm_tag(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}
