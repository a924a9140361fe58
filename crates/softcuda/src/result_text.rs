//! The table behind cuGetErrorName / cuGetErrorString: every CUresult of CUDA 12.8 with its name and
//! message, as static NUL-terminated strings (the C API hands out pointers that must live forever).
//! Codes and names are cudarc's `cudaError_enum` (CUDA 12.8); messages follow NVIDIA's driver.

/// (code, name, message) for every known CUresult.
const TABLE: &[(u32, &std::ffi::CStr, &std::ffi::CStr)] = &[
    (0, c"CUDA_SUCCESS", c"no error"),
    (1, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
    (4, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
    (5, c"CUDA_ERROR_PROFILER_DISABLED", c"profiler disabled"),
    (
        6,
        c"CUDA_ERROR_PROFILER_NOT_INITIALIZED",
        c"profiler not initialized",
    ),
    (
        7,
        c"CUDA_ERROR_PROFILER_ALREADY_STARTED",
        c"profiler already started",
    ),
    (
        8,
        c"CUDA_ERROR_PROFILER_ALREADY_STOPPED",
        c"profiler already stopped",
    ),
    (34, c"CUDA_ERROR_STUB_LIBRARY", c"stub library"),
    (46, c"CUDA_ERROR_DEVICE_UNAVAILABLE", c"device unavailable"),
    (
        100,
        c"CUDA_ERROR_NO_DEVICE",
        c"no CUDA-capable device is detected",
    ),
    (101, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
    (
        102,
        c"CUDA_ERROR_DEVICE_NOT_LICENSED",
        c"device not licensed",
    ),
    (
        200,
        c"CUDA_ERROR_INVALID_IMAGE",
        c"device kernel image is invalid",
    ),
    (
        201,
        c"CUDA_ERROR_INVALID_CONTEXT",
        c"invalid device context",
    ),
    (
        202,
        c"CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
        c"context already current",
    ),
    (205, c"CUDA_ERROR_MAP_FAILED", c"map failed"),
    (206, c"CUDA_ERROR_UNMAP_FAILED", c"unmap failed"),
    (207, c"CUDA_ERROR_ARRAY_IS_MAPPED", c"array is mapped"),
    (208, c"CUDA_ERROR_ALREADY_MAPPED", c"already mapped"),
    (
        209,
        c"CUDA_ERROR_NO_BINARY_FOR_GPU",
        c"no kernel image is available for execution on the device",
    ),
    (210, c"CUDA_ERROR_ALREADY_ACQUIRED", c"already acquired"),
    (211, c"CUDA_ERROR_NOT_MAPPED", c"not mapped"),
    (
        212,
        c"CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
        c"not mapped as array",
    ),
    (
        213,
        c"CUDA_ERROR_NOT_MAPPED_AS_POINTER",
        c"not mapped as pointer",
    ),
    (214, c"CUDA_ERROR_ECC_UNCORRECTABLE", c"ecc uncorrectable"),
    (
        215,
        c"CUDA_ERROR_UNSUPPORTED_LIMIT",
        c"limit is not supported on this architecture",
    ),
    (
        216,
        c"CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
        c"context already in use",
    ),
    (
        217,
        c"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        c"peer access unsupported",
    ),
    (
        218,
        c"CUDA_ERROR_INVALID_PTX",
        c"a PTX JIT compilation failed",
    ),
    (
        219,
        c"CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
        c"invalid graphics context",
    ),
    (
        220,
        c"CUDA_ERROR_NVLINK_UNCORRECTABLE",
        c"nvlink uncorrectable",
    ),
    (
        221,
        c"CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
        c"jit compiler not found",
    ),
    (
        222,
        c"CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        c"the provided PTX was compiled with an unsupported toolchain.",
    ),
    (
        223,
        c"CUDA_ERROR_JIT_COMPILATION_DISABLED",
        c"jit compilation disabled",
    ),
    (
        224,
        c"CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
        c"unsupported exec affinity",
    ),
    (
        225,
        c"CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
        c"unsupported devside sync",
    ),
    (226, c"CUDA_ERROR_CONTAINED", c"contained"),
    (
        300,
        c"CUDA_ERROR_INVALID_SOURCE",
        c"device kernel image is invalid",
    ),
    (301, c"CUDA_ERROR_FILE_NOT_FOUND", c"file not found"),
    (
        302,
        c"CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
        c"shared object symbol not found",
    ),
    (
        303,
        c"CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
        c"shared object init failed",
    ),
    (304, c"CUDA_ERROR_OPERATING_SYSTEM", c"operating system"),
    (
        400,
        c"CUDA_ERROR_INVALID_HANDLE",
        c"invalid resource handle",
    ),
    (
        401,
        c"CUDA_ERROR_ILLEGAL_STATE",
        c"the operation cannot be performed in the present state",
    ),
    (402, c"CUDA_ERROR_LOSSY_QUERY", c"lossy query"),
    (500, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
    (600, c"CUDA_ERROR_NOT_READY", c"device not ready"),
    (
        700,
        c"CUDA_ERROR_ILLEGAL_ADDRESS",
        c"an illegal memory access was encountered",
    ),
    (
        701,
        c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        c"too many resources requested for launch",
    ),
    (
        702,
        c"CUDA_ERROR_LAUNCH_TIMEOUT",
        c"the launch timed out and was terminated",
    ),
    (
        703,
        c"CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
        c"launch incompatible texturing",
    ),
    (
        704,
        c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        c"peer access already enabled",
    ),
    (
        705,
        c"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        c"peer access not enabled",
    ),
    (
        708,
        c"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
        c"primary context active",
    ),
    (
        709,
        c"CUDA_ERROR_CONTEXT_IS_DESTROYED",
        c"context is destroyed",
    ),
    (710, c"CUDA_ERROR_ASSERT", c"device-side assert triggered"),
    (711, c"CUDA_ERROR_TOO_MANY_PEERS", c"too many peers"),
    (
        712,
        c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        c"host memory already registered",
    ),
    (
        713,
        c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        c"host memory not registered",
    ),
    (
        714,
        c"CUDA_ERROR_HARDWARE_STACK_ERROR",
        c"hardware stack error",
    ),
    (
        715,
        c"CUDA_ERROR_ILLEGAL_INSTRUCTION",
        c"an illegal instruction was encountered",
    ),
    (716, c"CUDA_ERROR_MISALIGNED_ADDRESS", c"misaligned address"),
    (
        717,
        c"CUDA_ERROR_INVALID_ADDRESS_SPACE",
        c"operation not supported on global/shared address space",
    ),
    (718, c"CUDA_ERROR_INVALID_PC", c"invalid program counter"),
    (
        719,
        c"CUDA_ERROR_LAUNCH_FAILED",
        c"unspecified launch failure",
    ),
    (
        720,
        c"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
        c"too many blocks in cooperative launch",
    ),
    (721, c"CUDA_ERROR_TENSOR_MEMORY_LEAK", c"tensor memory leak"),
    (800, c"CUDA_ERROR_NOT_PERMITTED", c"operation not permitted"),
    (801, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
    (802, c"CUDA_ERROR_SYSTEM_NOT_READY", c"system not ready"),
    (
        803,
        c"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        c"system driver mismatch",
    ),
    (
        804,
        c"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        c"compat not supported on device",
    ),
    (
        805,
        c"CUDA_ERROR_MPS_CONNECTION_FAILED",
        c"mps connection failed",
    ),
    (806, c"CUDA_ERROR_MPS_RPC_FAILURE", c"mps rpc failure"),
    (
        807,
        c"CUDA_ERROR_MPS_SERVER_NOT_READY",
        c"mps server not ready",
    ),
    (
        808,
        c"CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
        c"mps max clients reached",
    ),
    (
        809,
        c"CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
        c"mps max connections reached",
    ),
    (
        810,
        c"CUDA_ERROR_MPS_CLIENT_TERMINATED",
        c"mps client terminated",
    ),
    (811, c"CUDA_ERROR_CDP_NOT_SUPPORTED", c"cdp not supported"),
    (
        812,
        c"CUDA_ERROR_CDP_VERSION_MISMATCH",
        c"cdp version mismatch",
    ),
    (
        900,
        c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        c"stream capture unsupported",
    ),
    (
        901,
        c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        c"stream capture invalidated",
    ),
    (
        902,
        c"CUDA_ERROR_STREAM_CAPTURE_MERGE",
        c"stream capture merge",
    ),
    (
        903,
        c"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
        c"stream capture unmatched",
    ),
    (
        904,
        c"CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
        c"stream capture unjoined",
    ),
    (
        905,
        c"CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
        c"stream capture isolation",
    ),
    (
        906,
        c"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        c"stream capture implicit",
    ),
    (907, c"CUDA_ERROR_CAPTURED_EVENT", c"captured event"),
    (
        908,
        c"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
        c"stream capture wrong thread",
    ),
    (909, c"CUDA_ERROR_TIMEOUT", c"wait operation timed out"),
    (
        910,
        c"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
        c"graph exec update failure",
    ),
    (911, c"CUDA_ERROR_EXTERNAL_DEVICE", c"external device"),
    (
        912,
        c"CUDA_ERROR_INVALID_CLUSTER_SIZE",
        c"invalid cluster size",
    ),
    (
        913,
        c"CUDA_ERROR_FUNCTION_NOT_LOADED",
        c"function not loaded",
    ),
    (
        914,
        c"CUDA_ERROR_INVALID_RESOURCE_TYPE",
        c"invalid resource type",
    ),
    (
        915,
        c"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
        c"invalid resource configuration",
    ),
    (916, c"CUDA_ERROR_KEY_ROTATION", c"key rotation"),
    (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

/// The name of `code` (`"CUDA_ERROR_INVALID_VALUE"`), or None for a code CUDA 12.8 does not define.
pub(crate) fn name(code: u32) -> Option<&'static std::ffi::CStr> {
    TABLE.iter().find(|e| e.0 == code).map(|e| e.1)
}

/// The message for `code` (`"invalid argument"`), or None for an unknown code.
pub(crate) fn message(code: u32) -> Option<&'static std::ffi::CStr> {
    TABLE.iter().find(|e| e.0 == code).map(|e| e.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_and_a_message() {
        let mut codes: Vec<u32> = TABLE.iter().map(|e| e.0).collect();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len());
        assert_eq!(
            name(700).unwrap().to_str().unwrap(),
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        );
        assert_eq!(message(1).unwrap().to_str().unwrap(), "invalid argument");
        assert!(name(12345).is_none());
    }
}
