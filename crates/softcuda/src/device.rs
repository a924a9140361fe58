//! The devices softcuda exposes (`SOFTCUDA_DEVICES`, default 1, all alike): name, UUID, memory
//! size, attributes — chosen to look like a compute-capability 9.0 part whose SMs are the host's
//! CPU cores — and what two of them answer about each other (peer access).

use cudarc::driver::sys::{CUdevice_attribute as A, CUresult};

use crate::abi::CuResult;
use crate::driver;

/// The device name every query reports.
pub(crate) const NAME: &str = "softcuda";

/// Threads per block, as on every NVIDIA part since Fermi.
pub(crate) const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Largest block in each dimension.
pub(crate) const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Largest grid in each dimension.
pub(crate) const MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
/// Static shared memory a block may use without opting in.
pub(crate) const MAX_SHARED_PER_BLOCK: u32 = 48 * 1024;
/// Shared memory a block may use after `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` (H100/H200).
pub(crate) const MAX_SHARED_PER_BLOCK_OPTIN: u32 = 227 * 1024;
/// Shared memory per SM (H100/H200).
pub(crate) const MAX_SHARED_PER_SM: u32 = 228 * 1024;
/// Threads resident per SM.
pub(crate) const MAX_THREADS_PER_SM: u32 = 2048;
/// Blocks resident per SM.
pub(crate) const MAX_BLOCKS_PER_SM: u32 = 32;
/// Registers per SM and per block.
pub(crate) const REGISTERS: u32 = 65536;
/// Warp width.
pub(crate) const WARP_SIZE: u32 = 32;

/// Checks a device ordinal: 0..`SOFTCUDA_DEVICES`.
pub(crate) fn check(ordinal: i32) -> CuResult<()> {
    driver::ensure_init()?;
    if (0..driver::device_count()).contains(&ordinal) {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_INVALID_DEVICE)
    }
}

/// A stable UUID per device ("softcuda", a version-1 style tail, the ordinal + 1 last).
pub(crate) fn uuid(ordinal: i32) -> [u8; 16] {
    let mut id = *b"softcuda\x00\x01\x90\x00\x00\x00\x00\x01";
    id[15] = (ordinal + 1) as u8;
    id
}

/// The PCI bus id string of a device: there is no PCI device, so bus = the ordinal
/// (`0000:00:00.0`, `0000:01:00.0`, ...), matching `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
pub(crate) fn pci_bus_id(ordinal: i32) -> String {
    format!("0000:{ordinal:02x}:00.0")
}

/// The device whose [`pci_bus_id`] is `id` (`domain:bus:device.function`, or `bus:device.function`).
pub(crate) fn by_pci_bus_id(id: &str) -> CuResult<i32> {
    let parts: Vec<&str> = id.split(':').collect();
    let (domain, bus, rest) = match parts.as_slice() {
        [d, b, r] => (*d, *b, *r),
        [b, r] => ("0", *b, *r),
        _ => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    };
    let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE);
    let (dev, func) = rest
        .split_once('.')
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    if hex(domain)? != 0 || hex(dev)? != 0 || hex(func)? != 0 {
        return Err(CUresult::CUDA_ERROR_INVALID_DEVICE);
    }
    let ordinal = i32::try_from(hex(bus)?).map_err(|_| CUresult::CUDA_ERROR_INVALID_DEVICE)?;
    check(ordinal)?;
    Ok(ordinal)
}

/// `CUdevice_P2PAttribute` between two different devices: every allocation is host memory any
/// CPU thread reaches with real atomics, so access and native atomics are supported; there are
/// no CUDA arrays.
pub(crate) fn p2p_attribute(attr: u32) -> CuResult<i32> {
    match attr {
        // PERFORMANCE_RANK: one rank for every pair.
        1 => Ok(0),
        // ACCESS_SUPPORTED, NATIVE_ATOMIC_SUPPORTED.
        2 | 3 => Ok(1),
        // CUDA_ARRAY_ACCESS_SUPPORTED.
        4 => Ok(0),
        _ => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
    }
}

/// The value of device attribute `attr` (a raw `CUdevice_attribute`), or
/// `CUDA_ERROR_INVALID_VALUE` for one softcuda does not know.
pub(crate) fn attribute(attr: u32, ordinal: i32) -> CuResult<i32> {
    let sms = i32::try_from(driver::cores()).unwrap_or(i32::MAX);
    let table: &[(A, i32)] = &[
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            MAX_THREADS_PER_BLOCK as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
            MAX_BLOCK_DIM[0] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
            MAX_BLOCK_DIM[1] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
            MAX_BLOCK_DIM[2] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
            MAX_GRID_DIM[0] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
            MAX_GRID_DIM[1] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
            MAX_GRID_DIM[2] as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            MAX_SHARED_PER_BLOCK as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 64 * 1024),
        (A::CU_DEVICE_ATTRIBUTE_WARP_SIZE, WARP_SIZE as i32),
        (A::CU_DEVICE_ATTRIBUTE_MAX_PITCH, i32::MAX),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
            REGISTERS as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1_980_000),
        (A::CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512),
        (A::CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1),
        (A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sms),
        (A::CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, 0),
        (A::CU_DEVICE_ATTRIBUTE_INTEGRATED, 0),
        (A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1),
        (A::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0),
        (A::CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512),
        (A::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1),
        (A::CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 0),
        // No PCI device: the ordinal, so that devices tell apart.
        (A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, ordinal),
        (A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0),
        (A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0),
        (A::CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0),
        (A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2_619_000),
        (A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120),
        (A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 50 * 1024 * 1024),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            MAX_THREADS_PER_SM as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 1),
        (A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1),
        (A::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32),
        (A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9),
        (A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
        (A::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1),
        (A::CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1),
        (A::CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            MAX_SHARED_PER_SM as i32,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
            REGISTERS as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1),
        (A::CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, 0),
        (A::CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, 0),
        (A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 1),
        (
            A::CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO,
            2,
        ),
        (A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0),
        (A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0),
        (A::CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1),
        (
            A::CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
            0,
        ),
        (A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0),
        (A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH, 0),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            MAX_SHARED_PER_BLOCK_OPTIN as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0),
        (A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 0),
        (
            A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
            0,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
            1,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
            1,
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
            MAX_BLOCKS_PER_SM as i32,
        ),
        (A::CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 0),
        (A::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 0),
        (
            A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
            1024,
        ),
        (A::CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1),
        (A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0),
        (A::CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 1),
        (A::CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS, 0),
        (A::CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0),
        (A::CU_DEVICE_ATTRIBUTE_MPS_ENABLED, 0),
        (A::CU_DEVICE_ATTRIBUTE_NUMA_CONFIG, 0),
        (A::CU_DEVICE_ATTRIBUTE_NUMA_ID, -1),
        (A::CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1),
    ];
    table
        .iter()
        .find(|(a, _)| *a as u32 == attr)
        .map(|&(_, v)| v)
        .or_else(|| stream_memory_ops(attr))
        .or_else(|| image_limit(attr))
        .or_else(|| unsupported_feature(attr))
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

/// The stream memory operation attributes, by value (cudarc's enum names them differently per
/// CUDA version): CUDA 12's (122 64-bit ops, 123 wait-NOR) answer 1, as softcuda implements
/// them (see `memop`); the CUDA 11 `_V1` names (92 memory ops, 93 64-bit ops, 94 wait-NOR)
/// describe the removed v1 API and answer 0, as the H200 does to each.
fn stream_memory_ops(attr: u32) -> Option<i32> {
    match attr {
        92..=94 => Some(0),
        122 | 123 => Some(1),
        _ => None,
    }
}

/// The texture and surface size limits, by value: those `array` enforces for 1D, 2D, 3D and
/// layered and gather arrays (the H200's), surfaces being any array; linear and pitched 2D
/// textures are bounded only by their allocation, so their figures are the H200's. Cubemaps,
/// mipmaps and the alternate 3D shape are not implemented: 0.
fn image_limit(attr: u32) -> Option<i32> {
    use crate::array::{MAX_1D, MAX_2D, MAX_3D, MAX_GATHER, MAX_LAYERED};
    let v = match attr {
        21 | 55 => MAX_1D,
        22 | 56 => MAX_2D[0],
        23 | 57 => MAX_2D[1],
        24..=26 | 58..=60 => MAX_3D,
        27 | 28 | 42 | 61 | 63 | 64 => MAX_LAYERED[0],
        29 | 43 | 62 | 65 => MAX_LAYERED[1],
        69 => 1 << 28,
        70 => 131_072,
        71 => 65_000,
        72 => 2_097_120,
        44 => 1,
        45 | 46 => MAX_GATHER,
        47..=49 | 52..=54 | 66..=68 | 73 | 74 | 77 => 0,
        _ => return None,
    };
    Some(v as i32)
}

/// Attributes of CUDA 13's list that describe features softcuda does not have, by value (several
/// are newer than the cuda.h cudarc is built against here): each answers 0, the value NVIDIA's
/// driver gives for a feature the device lacks.
fn unsupported_feature(attr: u32) -> Option<i32> {
    let zero = match attr {
        // Shareable handle types for exporting memory (POSIX fd, Win32, Win32 KMT, fabric, the
        // memory-pool mask) and GPUDirect RDMA with VMM.
        103..=105 | 110 | 119 | 128 => true,
        // Read-only host registration (113), timeline semaphores (114), RDMA flush/ordering
        // (117, 118), deferred array mapping (121), dma-buf (124).
        113 | 114 | 117 | 118 | 121 | 124 => true,
        // CIG contexts (D3D12 135, Vulkan 138), memory decompression (136, 137).
        135..=138 => true,
        // PCI device and subsystem ids of the GPU (139, 140): there is no PCI device.
        139 | 140 => true,
        // Host-NUMA VMM, pools and IPC (141..=143), host memory pools (144), host VMM (145),
        // dma-buf host allocations (146), partial host-native atomics (147).
        141..=147 => true,
        _ => false,
    };
    zero.then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest `CUdevice_attribute` value of CUDA 13.0's cuda.h (CU_DEVICE_ATTRIBUTE_MAX - 1).
    const LAST_ATTRIBUTE: u32 = 147;

    #[test]
    fn attributes_report_compute_capability_9_0() {
        assert_eq!(
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as u32, 0),
            Ok(9)
        );
        assert_eq!(
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as u32, 0),
            Ok(0)
        );
        assert_eq!(
            attribute(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X as u32, 0),
            Ok(i32::MAX)
        );
    }

    #[test]
    fn every_attribute_of_cuda_13_answers() {
        let missing: Vec<u32> = (1..=LAST_ATTRIBUTE)
            .filter(|&a| attribute(a, 0).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "attributes without an answer: {missing:?}"
        );
    }

    #[test]
    fn unknown_attribute_is_invalid_value() {
        assert_eq!(attribute(9999, 0), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(attribute(0, 0), Err(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert_eq!(
            attribute(LAST_ATTRIBUTE + 1, 0),
            Err(CUresult::CUDA_ERROR_INVALID_VALUE)
        );
    }
}
