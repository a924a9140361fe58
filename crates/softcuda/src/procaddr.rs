//! Driver entry-point access: `cuGetProcAddress` (v1 and v2) and `cuGetExportTable`.
//!
//! cuGetProcAddress takes a *base* name ("cuMemAlloc") and the CUDA version the caller was built
//! for, and answers the symbol variant that version's header meant ("cuMemAlloc_v2" from 3.2 on).
//! The CUDA runtime (libcudart) loads every driver function this way, one call per symbol with
//! the version in which the variant it uses appeared. Symbols are found in softcuda's own shared
//! object (located with `dladdr` on one of its exports), never in the process's global scope,
//! where another libcuda could answer.
//!
//! `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` answers the `_ptsz`/`_ptds` variant where
//! the symbol has one (`exports::PER_THREAD_SYMBOLS`), the symbol itself otherwise; the default
//! and legacy flags answer the legacy-stream symbol. Not provided: the 32-bit-era first
//! variants of the functions whose ABI changed in CUDA 3.2 (asking for those is
//! VERSION_NOT_SUFFICIENT).
//!
//! cuGetExportTable hands out NVIDIA's private tables (used by NVRTC and libcudart); softcuda
//! has none, so every table id is unknown, as on a driver that lacks it. libcudart 13 cannot run
//! without them, and serving them would not help: after its runtime-interface tables it asks
//! the driver for a keyed digest that proves it is NVIDIA's (the integrity-check table), which
//! softcuda does not forge, and refusing a later table once earlier ones were served crashes
//! libcudart. Refusing the first one fails its device calls cleanly. docs/SOFTCUDA.md ("Missing")
//! records each table and slot the runtime uses.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

use cudarc::driver::sys::CUresult;

use crate::abi::CuResult;
use crate::driver::DRIVER_VERSION;

/// `CUdriverProcAddressQueryResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// `CU_GET_PROC_ADDRESS_SUCCESS`.
    Found = 0,
    /// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
    SymbolNotFound = 1,
    /// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
    VersionNotSufficient = 2,
}

/// `CU_GET_PROC_ADDRESS_DEFAULT | LEGACY_STREAM | PER_THREAD_DEFAULT_STREAM`.
const VALID_FLAGS: u64 = 0x3;
/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`.
const PER_THREAD_FLAG: u64 = 0x2;

/// Base names whose symbol changed: (base, CUDA version the variant appeared in, symbol). The
/// versions are those of cuda.h's `PFN_<base>_v<version>` typedefs.
const VARIANTS: &[(&str, i32, &str)] = &[
    ("cuCtxCreate", 2000, "cuCtxCreate"),
    ("cuCtxCreate", 3020, "cuCtxCreate_v2"),
    ("cuCtxCreate", 11040, "cuCtxCreate_v3"),
    ("cuCtxCreate", 12050, "cuCtxCreate_v4"),
    ("cuCtxDestroy", 4000, "cuCtxDestroy_v2"),
    ("cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2"),
    ("cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2"),
    ("cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"),
    ("cuDeviceGetUuid", 9020, "cuDeviceGetUuid"),
    ("cuDeviceGetUuid", 11040, "cuDeviceGetUuid_v2"),
    (
        "cuDevicePrimaryCtxRelease",
        7000,
        "cuDevicePrimaryCtxRelease",
    ),
    (
        "cuDevicePrimaryCtxRelease",
        11000,
        "cuDevicePrimaryCtxRelease_v2",
    ),
    ("cuDevicePrimaryCtxReset", 7000, "cuDevicePrimaryCtxReset"),
    (
        "cuDevicePrimaryCtxReset",
        11000,
        "cuDevicePrimaryCtxReset_v2",
    ),
    (
        "cuDevicePrimaryCtxSetFlags",
        7000,
        "cuDevicePrimaryCtxSetFlags",
    ),
    (
        "cuDevicePrimaryCtxSetFlags",
        11000,
        "cuDevicePrimaryCtxSetFlags_v2",
    ),
    ("cuModuleGetGlobal", 3020, "cuModuleGetGlobal_v2"),
    ("cuMemGetInfo", 3020, "cuMemGetInfo_v2"),
    ("cuMemAlloc", 3020, "cuMemAlloc_v2"),
    ("cuMemFree", 3020, "cuMemFree_v2"),
    ("cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2"),
    ("cuMemAllocHost", 3020, "cuMemAllocHost_v2"),
    (
        "cuMemHostGetDevicePointer",
        3020,
        "cuMemHostGetDevicePointer_v2",
    ),
    ("cuMemHostRegister", 4000, "cuMemHostRegister"),
    ("cuMemHostRegister", 6050, "cuMemHostRegister_v2"),
    ("cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2"),
    ("cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2"),
    ("cuMemcpyDtoD", 3020, "cuMemcpyDtoD_v2"),
    ("cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2"),
    ("cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2"),
    ("cuMemcpyDtoDAsync", 3020, "cuMemcpyDtoDAsync_v2"),
    ("cuMemcpy2D", 3020, "cuMemcpy2D_v2"),
    ("cuMemcpy2DUnaligned", 3020, "cuMemcpy2DUnaligned_v2"),
    ("cuMemcpy2DAsync", 3020, "cuMemcpy2DAsync_v2"),
    ("cuArrayCreate", 3020, "cuArrayCreate_v2"),
    ("cuArrayGetDescriptor", 3020, "cuArrayGetDescriptor_v2"),
    ("cuArray3DCreate", 3020, "cuArray3DCreate_v2"),
    ("cuArray3DGetDescriptor", 3020, "cuArray3DGetDescriptor_v2"),
    ("cuMemcpy3D", 3020, "cuMemcpy3D_v2"),
    ("cuMemcpy3DAsync", 3020, "cuMemcpy3DAsync_v2"),
    ("cuMemcpyHtoA", 3020, "cuMemcpyHtoA_v2"),
    ("cuMemcpyAtoH", 3020, "cuMemcpyAtoH_v2"),
    ("cuMemcpyHtoAAsync", 3020, "cuMemcpyHtoAAsync_v2"),
    ("cuMemcpyAtoHAsync", 3020, "cuMemcpyAtoHAsync_v2"),
    ("cuMemcpyAtoD", 3020, "cuMemcpyAtoD_v2"),
    ("cuMemcpyDtoA", 3020, "cuMemcpyDtoA_v2"),
    ("cuMemsetD8", 3020, "cuMemsetD8_v2"),
    ("cuMemsetD16", 3020, "cuMemsetD16_v2"),
    ("cuMemsetD32", 3020, "cuMemsetD32_v2"),
    ("cuMemAdvise", 12020, "cuMemAdvise_v2"),
    ("cuMemPrefetchAsync", 12020, "cuMemPrefetchAsync_v2"),
    ("cuStreamDestroy", 4000, "cuStreamDestroy_v2"),
    ("cuEventDestroy", 4000, "cuEventDestroy_v2"),
    ("cuEventElapsedTime", 2000, "cuEventElapsedTime"),
    ("cuEventElapsedTime", 12080, "cuEventElapsedTime_v2"),
    ("cuStreamBeginCapture", 10000, "cuStreamBeginCapture"),
    ("cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2"),
    ("cuStreamGetCaptureInfo", 10010, "cuStreamGetCaptureInfo"),
    ("cuStreamGetCaptureInfo", 11030, "cuStreamGetCaptureInfo_v2"),
    ("cuStreamGetCaptureInfo", 12030, "cuStreamGetCaptureInfo_v3"),
    ("cuGraphInstantiate", 10000, "cuGraphInstantiate"),
    ("cuGraphAddNode", 12020, "cuGraphAddNode"),
    ("cuGraphAddNode", 12030, "cuGraphAddNode_v2"),
    ("cuGraphAddDependencies", 10000, "cuGraphAddDependencies"),
    ("cuGraphAddDependencies", 12030, "cuGraphAddDependencies_v2"),
    (
        "cuGraphRemoveDependencies",
        10000,
        "cuGraphRemoveDependencies",
    ),
    (
        "cuGraphRemoveDependencies",
        12030,
        "cuGraphRemoveDependencies_v2",
    ),
    ("cuGraphGetEdges", 10000, "cuGraphGetEdges"),
    ("cuGraphGetEdges", 12030, "cuGraphGetEdges_v2"),
    (
        "cuGraphNodeGetDependencies",
        10000,
        "cuGraphNodeGetDependencies",
    ),
    (
        "cuGraphNodeGetDependencies",
        12030,
        "cuGraphNodeGetDependencies_v2",
    ),
    (
        "cuGraphNodeGetDependentNodes",
        10000,
        "cuGraphNodeGetDependentNodes",
    ),
    (
        "cuGraphNodeGetDependentNodes",
        12030,
        "cuGraphNodeGetDependentNodes_v2",
    ),
    ("cuGraphInstantiate", 11000, "cuGraphInstantiate_v2"),
    ("cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags"),
    ("cuGraphAddKernelNode", 10000, "cuGraphAddKernelNode"),
    ("cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2"),
    (
        "cuGraphKernelNodeGetParams",
        10000,
        "cuGraphKernelNodeGetParams",
    ),
    (
        "cuGraphKernelNodeGetParams",
        12000,
        "cuGraphKernelNodeGetParams_v2",
    ),
    (
        "cuGraphKernelNodeSetParams",
        10000,
        "cuGraphKernelNodeSetParams",
    ),
    (
        "cuGraphKernelNodeSetParams",
        12000,
        "cuGraphKernelNodeSetParams_v2",
    ),
    (
        "cuGraphExecKernelNodeSetParams",
        10010,
        "cuGraphExecKernelNodeSetParams",
    ),
    (
        "cuGraphExecKernelNodeSetParams",
        12000,
        "cuGraphExecKernelNodeSetParams_v2",
    ),
    ("cuMemAllocPitch", 3020, "cuMemAllocPitch_v2"),
    ("cuLinkCreate", 5050, "cuLinkCreate"),
    ("cuLinkCreate", 6050, "cuLinkCreate_v2"),
    ("cuLinkAddData", 5050, "cuLinkAddData"),
    ("cuLinkAddData", 6050, "cuLinkAddData_v2"),
    ("cuLinkAddFile", 5050, "cuLinkAddFile"),
    ("cuLinkAddFile", 6050, "cuLinkAddFile_v2"),
    ("cuStreamWaitValue32", 8000, "cuStreamWaitValue32"),
    ("cuStreamWaitValue32", 11070, "cuStreamWaitValue32_v2"),
    ("cuStreamWaitValue64", 9000, "cuStreamWaitValue64"),
    ("cuStreamWaitValue64", 11070, "cuStreamWaitValue64_v2"),
    ("cuStreamWriteValue32", 8000, "cuStreamWriteValue32"),
    ("cuStreamWriteValue32", 11070, "cuStreamWriteValue32_v2"),
    ("cuStreamWriteValue64", 9000, "cuStreamWriteValue64"),
    ("cuStreamWriteValue64", 11070, "cuStreamWriteValue64_v2"),
    ("cuStreamBatchMemOp", 8000, "cuStreamBatchMemOp"),
    ("cuStreamBatchMemOp", 11070, "cuStreamBatchMemOp_v2"),
    ("cuGetProcAddress", 11030, "cuGetProcAddress"),
    ("cuGetProcAddress", 12000, "cuGetProcAddress_v2"),
];

/// The CUDA version each function without variants appeared in, where later than CUDA 2.0 and
/// where a caller could plausibly ask for an older version.
const INTRODUCED: &[(&str, i32)] = &[
    ("cuCtxGetId", 12000),
    ("cuTexObjectCreate", 5000),
    ("cuTexObjectDestroy", 5000),
    ("cuTexObjectGetResourceDesc", 5000),
    ("cuTexObjectGetTextureDesc", 5000),
    ("cuSurfObjectCreate", 5000),
    ("cuSurfObjectDestroy", 5000),
    ("cuSurfObjectGetResourceDesc", 5000),
    ("cuCtxSetFlags", 12010),
    ("cuFuncGetParamInfo", 12040),
    ("cuLaunchKernelEx", 11060),
    ("cuLaunchHostFunc", 10000),
    ("cuMemAllocAsync", 11020),
    ("cuMemFreeAsync", 11020),
    ("cuMemAllocFromPoolAsync", 11020),
    ("cuMemPoolCreate", 11020),
    ("cuMemPoolDestroy", 11020),
    ("cuMemPoolTrimTo", 11020),
    ("cuMemPoolSetAccess", 11020),
    ("cuMemPoolGetAccess", 11020),
    ("cuMemPoolGetAttribute", 11020),
    ("cuMemPoolSetAttribute", 11020),
    ("cuDeviceGetDefaultMemPool", 11020),
    ("cuDeviceGetMemPool", 11020),
    ("cuDeviceSetMemPool", 11020),
    ("cuGraphCreate", 10000),
    ("cuGraphLaunch", 10000),
    ("cuGraphUpload", 11010),
    ("cuGraphDestroy", 10000),
    ("cuGraphDestroyNode", 10000),
    ("cuGraphNodeSetParams", 12020),
    ("cuGraphExecNodeSetParams", 12020),
    ("cuGraphExecDestroy", 10000),
    ("cuGraphInstantiateWithFlags", 11040),
    ("cuGraphAddChildGraphNode", 10000),
    ("cuGraphChildGraphNodeGetGraph", 10000),
    ("cuGraphExecChildGraphNodeSetParams", 11010),
    ("cuGraphClone", 10000),
    ("cuGraphAddMemcpyNode", 10000),
    ("cuGraphMemcpyNodeGetParams", 10000),
    ("cuGraphMemcpyNodeSetParams", 10000),
    ("cuGraphExecMemcpyNodeSetParams", 10020),
    ("cuGraphAddMemAllocNode", 11040),
    ("cuGraphAddMemFreeNode", 11040),
    ("cuGraphMemAllocNodeGetParams", 11040),
    ("cuGraphMemFreeNodeGetParams", 11040),
    ("cuDeviceGetGraphMemAttribute", 11040),
    ("cuDeviceSetGraphMemAttribute", 11040),
    ("cuDeviceGraphMemTrim", 11040),
    ("cuStreamEndCapture", 10000),
    ("cuStreamIsCapturing", 10000),
    ("cuDeviceGetExecAffinitySupport", 11040),
    ("cuOccupancyAvailableDynamicSMemPerBlock", 10020),
    ("cuLibraryLoadData", 12000),
    ("cuLibraryLoadFromFile", 12000),
    ("cuLibraryUnload", 12000),
    ("cuLibraryGetKernel", 12000),
    ("cuLibraryGetModule", 12000),
    ("cuLibraryGetGlobal", 12000),
    ("cuLibraryGetManaged", 12000),
    ("cuLibraryGetUnifiedFunction", 12000),
    ("cuKernelGetFunction", 12000),
    ("cuKernelGetAttribute", 12000),
    ("cuKernelSetAttribute", 12000),
    ("cuKernelSetCacheConfig", 12000),
    ("cuKernelGetName", 12030),
    ("cuKernelGetParamInfo", 12040),
    ("cuLibraryGetKernelCount", 12040),
    ("cuLibraryEnumerateKernels", 12040),
    ("cuKernelGetLibrary", 12050),
];

/// Whether `name` is a base name at all: driver functions start with `cu`; a versioned or
/// per-thread variant name is not a base name.
fn is_base_name(name: &str) -> bool {
    if !name.starts_with("cu") || name.ends_with("_ptsz") || name.ends_with("_ptds") {
        return false;
    }
    match name.rsplit_once("_v") {
        Some((_, digits)) => digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()),
        None => true,
    }
}

/// The symbol a base name means at `version`, or why there is none.
pub(crate) fn symbol_for(name: &str, version: i32) -> Result<&str, Status> {
    if !is_base_name(name) {
        return Err(Status::SymbolNotFound);
    }
    let mut variants = VARIANTS
        .iter()
        .filter(|(base, ..)| *base == name)
        .peekable();
    if variants.peek().is_some() {
        return variants
            .filter(|(_, since, _)| *since <= version)
            .max_by_key(|(_, since, _)| *since)
            .map(|(.., symbol)| *symbol)
            .ok_or(Status::VersionNotSufficient);
    }
    let since = INTRODUCED
        .iter()
        .find(|(base, _)| *base == name)
        .map_or(0, |(_, v)| *v);
    if version < since {
        return Err(Status::VersionNotSufficient);
    }
    Ok(name)
}

/// The per-thread-default-stream variant of `symbol` (`cuLaunchKernel_ptsz`), or `symbol` itself
/// when it takes no stream.
fn per_thread_variant(symbol: &str) -> String {
    match crate::exports::PER_THREAD_SYMBOLS
        .iter()
        .find(|(legacy, _)| *legacy == symbol)
    {
        Some((_, suffix)) => format!("{symbol}{suffix}"),
        None => symbol.to_owned(),
    }
}

/// softcuda's own shared object as a dlopen handle (0 when it cannot be found: then softcuda is
/// linked into the executable and the global scope is searched).
fn own_handle() -> usize {
    static HANDLE: OnceLock<usize> = OnceLock::new();
    *HANDLE.get_or_init(|| {
        let marker = crate::exports::softcuda_abi_version as *const c_void;
        // SAFETY: Dl_info is plain data; dladdr fills it for an address inside a loaded object.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `marker` is the address of one of our functions; `info` is writable.
        if unsafe { libc::dladdr(marker, &mut info) } == 0 || info.dli_fname.is_null() {
            return 0;
        }
        // SAFETY: dli_fname is the NUL-terminated path of an object already loaded; RTLD_NOLOAD
        // only takes a new reference to it (never released: softcuda is never unloaded).
        let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        handle.addr()
    })
}

/// The address of softcuda's export `symbol`, if it has one.
fn lookup(symbol: &str) -> Option<*mut c_void> {
    let name = std::ffi::CString::new(symbol).ok()?;
    let handle = match own_handle() {
        0 => libc::RTLD_DEFAULT,
        h => std::ptr::with_exposed_provenance_mut(h),
    };
    // SAFETY: `handle` is a dlopen handle of a loaded object (or RTLD_DEFAULT) and `name` is
    // NUL-terminated; dlsym only reads them.
    let addr = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!addr.is_null()).then_some(addr)
}

/// cuGetProcAddress: the function for `name` at `version`, or (status, error).
pub(crate) fn get(
    name: &CStr,
    version: i32,
    flags: u64,
) -> Result<*mut c_void, (Status, CUresult)> {
    let invalid = (Status::SymbolNotFound, CUresult::CUDA_ERROR_INVALID_VALUE);
    if flags & !VALID_FLAGS != 0 || !(0..=DRIVER_VERSION).contains(&version) {
        return Err(invalid);
    }
    let not_found = |status| (status, CUresult::CUDA_ERROR_NOT_FOUND);
    let name = name
        .to_str()
        .map_err(|_| not_found(Status::SymbolNotFound))?;
    let symbol = symbol_for(name, version).map_err(not_found)?;
    let symbol = if flags & PER_THREAD_FLAG != 0 {
        per_thread_variant(symbol)
    } else {
        symbol.to_owned()
    };
    match lookup(&symbol) {
        Some(f) => Ok(f),
        // A base name we know the versions of but do not implement is simply not found.
        None => Err(not_found(Status::SymbolNotFound)),
    }
}

/// cuGetExportTable: softcuda has no private tables.
pub(crate) fn export_table(id_is_null: bool) -> CuResult<()> {
    if id_is_null {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    Err(CUresult::CUDA_ERROR_INVALID_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_base_names_resolve_to_the_variant_of_the_asked_version() {
        assert_eq!(symbol_for("cuMemAlloc", 13000), Ok("cuMemAlloc_v2"));
        assert_eq!(symbol_for("cuCtxCreate", 11040), Ok("cuCtxCreate_v3"));
        assert_eq!(symbol_for("cuCtxCreate", 13000), Ok("cuCtxCreate_v4"));
        assert_eq!(symbol_for("cuCtxCreate", 3020), Ok("cuCtxCreate_v2"));
        assert_eq!(
            symbol_for("cuMemAlloc", 2000),
            Err(Status::VersionNotSufficient)
        );
        assert_eq!(symbol_for("cuInit", 2000), Ok("cuInit"));
        assert_eq!(
            symbol_for("cuStreamWriteValue32", 13000),
            Ok("cuStreamWriteValue32_v2")
        );
        assert_eq!(
            symbol_for("cuLaunchKernelEx", 11040),
            Err(Status::VersionNotSufficient)
        );
    }

    #[test]
    fn variant_and_foreign_names_are_not_base_names() {
        for name in [
            "cuMemAlloc_v2",
            "cuLaunchKernel_ptsz",
            "softcuda_abi_version",
            "malloc",
        ] {
            assert_eq!(
                symbol_for(name, 13000),
                Err(Status::SymbolNotFound),
                "{name}"
            );
        }
        assert_eq!(
            symbol_for("cuStreamGetCaptureInfo", 13000),
            Ok("cuStreamGetCaptureInfo_v3")
        );
    }

    #[test]
    fn per_thread_variants_exist_only_for_calls_that_use_a_stream() {
        assert_eq!(per_thread_variant("cuLaunchKernel"), "cuLaunchKernel_ptsz");
        assert_eq!(
            per_thread_variant("cuMemcpyHtoD_v2"),
            "cuMemcpyHtoD_v2_ptds"
        );
        assert_eq!(
            per_thread_variant("cuStreamGetCaptureInfo_v3"),
            "cuStreamGetCaptureInfo_v3_ptsz"
        );
        assert_eq!(per_thread_variant("cuMemAlloc_v2"), "cuMemAlloc_v2");
    }
}
